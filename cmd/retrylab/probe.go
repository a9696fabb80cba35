package main

import (
	"os"

	"github.com/retrylab/retrylab/internal/noise"
)

// probeCommand is the command line of a noise probe process: this
// executable with the hidden first argument noise.ProbeArg, which main
// hands to noise.ProbeMain (see isProbe). Nil when the executable cannot
// be found: the run then has no probe source.
func probeCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, noise.ProbeArg}
}

// isProbe says whether a process with arguments args (os.Args) is a
// noise probe that a run of this executable started.
func isProbe(args []string) bool { return len(args) > 1 && args[1] == noise.ProbeArg }
