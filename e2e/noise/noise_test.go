// Package noise holds the real-time tests of verdicts under the host's
// noise that need programs in other languages: a fleet of one-client
// Python processes, as heavy as a user runs it on two cores.
package noise

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
)

var execNoise = flag.Bool("exec-noise", false, "run the fleets of Python processes (make check)")

// TestExecPoliciesOnABusyHost: 60 one-client Python processes on
// outage-bare, each with a policy this test knows (policies.py): the ones
// that bring retries back together — every wait 1 s, 0.5 or 1.5 s at
// random, or until the wall clock's next second — FAIL waves; full jitter
// PASSes it or leaves it open, never FAIL. 60 interpreters on two cores
// are the host's noise the analyzer must see through.
func TestExecPoliciesOnABusyHost(t *testing.T) {
	if !*execNoise {
		t.Skip("60 Python processes a run, four runs: run with -args -exec-noise (make check)")
	}
	// Debian's interpreter starts at once; a version manager's shim (a
	// shell script) costs seconds a process on a loaded host.
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		py, err = exec.LookPath("python3")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is not installed")
		}
		t.Skip("python3 is not installed")
	}
	sc, err := scenarios.Resolve("outage-bare")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		policy string
		bad    bool
	}{{"lockstep", true}, {"bimodal", true}, {"clock", true}, {"full", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			var buf bytes.Buffer
			subj := subjects.Program{Path: py, Args: []string{"policies.py", "--policy", tc.policy}}
			if _, err := runner.Run(t.Context(), sc, runner.RunOptions{Subject: subj, Seed: 1, Clients: 60, Timeline: &buf}); err != nil {
				t.Fatal(err)
			}
			v, err := analyzer.Analyze(bytes.NewReader(buf.Bytes()), analyzer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := v.Check(analyzer.CheckWaves)
			t.Logf("%s: verdict %s (failed %v; inconclusive %q; %d attempts, %d outcomes %v); waves %s %v: %s", tc.policy, v.Status, v.Failed(), v.Inconclusive, v.Figures.Attempts, v.Figures.Outcomes, v.Figures.Results, c.Status, c.Range, c.Reason)
			switch {
			case tc.bad && c.Status != analyzer.StatusFail:
				t.Errorf("%s: waves = %s; want fail", tc.policy, c.Status)
			case !tc.bad && c.Status == analyzer.StatusFail:
				t.Errorf("%s: waves = fail; want pass or inconclusive", tc.policy)
			}
		})
	}
}
