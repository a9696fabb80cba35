//go:build !race

package findings

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
