package testenv_test

import (
	"runtime/debug"
	"testing"

	"github.com/retrylab/retrylab/internal/testenv"
)

// TestRaceEnabledMatchesTheBuild checks RaceEnabled against the build
// settings the go command stamped into the test binary: -race is there
// exactly when the race detector is on.
func TestRaceEnabledMatchesTheBuild(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build info in the test binary")
	}
	race := false
	for _, s := range info.Settings {
		if s.Key == "-race" {
			race = s.Value == "true"
		}
	}
	if testenv.RaceEnabled != race {
		t.Errorf("RaceEnabled = %v, the build's -race setting = %v", testenv.RaceEnabled, race)
	}
}
