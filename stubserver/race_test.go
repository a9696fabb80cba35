//go:build race

package stubserver

// raceEnabled is true under -race, which makes loopback load ~10× slower.
const raceEnabled = true
