package subjects_test

import (
	"slices"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/retrylabtest"
)

// TestWavesControls plays the waves controls of issue 11 in virtual time:
// each synchronizing control fails waves, and nothing else, where its
// scenario exposes it, on every seed; retry-after-plus-constant fails
// nothing and gets the server-induced-synchronization warning.
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
	for _, e := range exposes {
		for seed := int64(1); seed <= 3; seed++ {
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
		for seed := int64(1); seed <= 3; seed++ {
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
			// The controls' correct loop adds its backoff draw on top of
			// Retry-After: no warning. (retry-4xx is that loop in these
			// scenarios: they send no 4xx.)
			ref := retrylabtest.Run(t, retrylabtest.Builtin(sc), retrylabtest.Registered("retry-4xx"), retrylabtest.WithSeed(seed), retrylabtest.WithChecks(analyzer.CheckWaves))
			for _, w := range ref.Verdict.Warnings {
				if w.ID == analyzer.WarnServerSync {
					t.Errorf("%s × retry-4xx, seed %d: %s", sc, seed, w.Message)
				}
			}
			ref.AssertPass(t)
		}
	}
}
