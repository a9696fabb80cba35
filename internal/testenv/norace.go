//go:build !race

package testenv

// RaceEnabled reports whether the race detector is on.
const RaceEnabled = false
