//go:build race

package subjects_test

// raceEnabled: the race detector is on (tests that play many scenarios
// play fewer seeds under it).
const raceEnabled = true
