//go:build !race

package stubserver

const raceEnabled = false
