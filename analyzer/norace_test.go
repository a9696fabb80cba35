//go:build !race

package analyzer

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
