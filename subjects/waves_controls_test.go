package subjects_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/retrylabtest"
)

// TestWavesControls plays the waves controls of issue 11 in virtual time:
// each synchronizing control fails waves, and nothing else, where its
// scenario exposes it, on every seed; retry-after-plus-constant fails
// nothing and gets the server-induced-synchronization warning, as the
// reference client, which obeys Retry-After exactly, does too.
func TestWavesControls(t *testing.T) {
	exposes := []struct {
		control, scenario string
	}{
		{"discrete-delays", "outage-bare"},
		{"discrete-delays", "flapping"},
		{"clock-aligned", "outage-bare"},
		{"clock-aligned", "flapping"},
		{"capped-lockstep", "outage-bare"},
	}
	// Three seeds in `make matrix`; under the race detector, which looks
	// for races and not seeds, one.
	seeds := int64(3)
	if testenv.RaceEnabled {
		seeds = 1
	}
	// -short (make test) plays each control once, and the reference
	// scenarios' comparison on one of them; make check plays them all.
	played := map[string]bool{}
	for _, e := range exposes {
		if testing.Short() && played[e.control] {
			continue
		}
		played[e.control] = true
		for seed := int64(1); seed <= seeds; seed++ {
			// give-up is skipped: on main it fails the reference client in
			// outage-bare too (its budget and the scenario are being
			// reconciled); a control that stops growing its waits gives up
			// early, which is that check's business, not its mistake here.
			res := retrylabtest.Run(t, retrylabtest.Builtin(e.scenario), retrylabtest.Registered(e.control), retrylabtest.WithSeed(seed), retrylabtest.WithSkip(analyzer.CheckGiveUp))
			if got := res.Failed(); !slices.Equal(got, []string{analyzer.CheckWaves}) {
				c := res.Verdict.Check(analyzer.CheckWaves)
				t.Errorf("%s × %s, seed %d: failed %v; want [waves] (waves %s %.2f: %s)", e.scenario, e.control, seed, got, c.Status, c.Figure, c.Reason)
			}
		}
	}
	for _, sc := range []string{"outage-delta", "outage-date", "post-idempotency"} {
		if testing.Short() && sc != "outage-delta" {
			continue
		}
		for seed := int64(1); seed <= seeds; seed++ {
			res := retrylabtest.Run(t, retrylabtest.Builtin(sc), retrylabtest.Registered("retry-after-plus-constant"), retrylabtest.WithSeed(seed), retrylabtest.WithChecks(analyzer.CheckWaves))
			if got := res.Failed(); len(got) != 0 {
				t.Errorf("%s × retry-after-plus-constant, seed %d: failed %v; want none", sc, seed, got)
			}
			warned := false
			for _, w := range res.Verdict.Warnings {
				warned = warned || w.ID == analyzer.WarnServerSync
			}
			if !warned {
				t.Errorf("%s × retry-after-plus-constant, seed %d: no %s warning", sc, seed, analyzer.WarnServerSync)
			}
			// retry-4xx is the reference client in these scenarios (they
			// send no 4xx, and it keeps the reference's retry budget):
			// the same attempts, and the same warnings, the reference's own
			// obeying Retry-After exactly among them. The control's warning
			// is its own only in what it adds: a constant, never a spread.
			ref := retrylabtest.Run(t, retrylabtest.Builtin(sc), retrylabtest.Registered("retry-4xx"), retrylabtest.WithSeed(seed), retrylabtest.WithChecks(analyzer.CheckWaves))
			own := retrylabtest.Run(t, retrylabtest.Builtin(sc), retrylabtest.Registered("retrylab"), retrylabtest.WithSeed(seed), retrylabtest.WithChecks(analyzer.CheckWaves))
			if ref.Verdict.Figures.Attempts != own.Verdict.Figures.Attempts || fmt.Sprint(ref.Verdict.Warnings) != fmt.Sprint(own.Verdict.Warnings) {
				t.Errorf("%s × retry-4xx, seed %d: %d attempts, warnings %v; want retrylab's %d, %v", sc, seed,
					ref.Verdict.Figures.Attempts, ref.Verdict.Warnings, own.Verdict.Figures.Attempts, own.Verdict.Warnings)
			}
			ref.AssertPass(t)
		}
	}
}
