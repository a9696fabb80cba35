package runner

import (
	"bytes"
	"context"
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
)

var interrupts = flag.Int("interrupts", 0, "run TestInterruptedNeverFails at this many random instants (make check: 20)")

// TestInterruptedNeverFails: our client, in real time, on the built-ins
// whose time windows a cut run meets mid-flight (outage-bare,
// outage-delta, flapping), interrupted at random instants as SIGINT
// interrupts `retrylab run` (its context ends): the verdict is never
// FAIL. An interrupted run is INCONCLUSIVE whatever it read; a FAIL would
// be a check deciding on what the interruption and the host's noise made.
func TestInterruptedNeverFails(t *testing.T) {
	if *interrupts <= 0 {
		t.Skip("real-time runs cut at random instants: run with -args -interrupts 20 (make check)")
	}
	subj, err := subjects.Lookup("retrylab")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"outage-bare", "outage-delta", "flapping"}
	r := rand.New(rand.NewPCG(20, 26))
	counts := map[string]int{}
	for i := range *interrupts {
		name := names[i%len(names)]
		sc, err := scenarios.Resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		// An instant from the first second to the scenario's last phase.
		at := time.Second + time.Duration(r.Int64N(int64(8*time.Second)))
		ctx, cancel := context.WithTimeout(t.Context(), at)
		var buf bytes.Buffer
		_, runErr := Run(ctx, sc, RunOptions{Subject: subj, Seed: int64(i + 1), Timeline: &buf})
		cancel()
		v, err := analyzer.Analyze(bytes.NewReader(buf.Bytes()), analyzer.Options{})
		if err != nil {
			t.Fatalf("%s cut at %v: %v (run: %v)", name, at, err, runErr)
		}
		counts[v.Status]++
		t.Logf("%s cut at %v: %s; failed %v", name, at, v.Status, v.Failed())
		if v.Status == analyzer.VerdictFail {
			msg := ""
			for _, c := range v.Checks {
				if c.Status == analyzer.StatusFail {
					msg += "\n\t" + c.ID + ": " + c.Reason
				}
			}
			t.Errorf("%s cut at %v: FAIL%s", name, at, msg)
		}
	}
	t.Logf("%d runs: %d pass, %d fail, %d inconclusive", *interrupts, counts[analyzer.VerdictPass], counts[analyzer.VerdictFail], counts[analyzer.VerdictInconclusive])
}
