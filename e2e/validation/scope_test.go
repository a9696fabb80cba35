package validation_test

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/retrylabtest"
)

// scopeSeeds is how many seeds (1..N) TestRetryBudgetScope runs each
// cell with: 1 in `make matrix` (a per-client storm costs seconds of CPU);
// client/README.md's figures are from -scope-seeds 3.
var scopeSeeds = flag.Int("scope-seeds", 1, "seeds 1..N of TestRetryBudgetScope")

// TestRetryBudgetScope measures the scope of our client's retry budget
// (one per Transport) in both metastable built-ins: one Transport, so one
// budget, per simulated client (fleet.processes unset, or one process a
// client), against one per process (fleet.processes: 4, the clients of a
// process sharing it). client/README.md's "The budget's scope" states the
// figures it logs (-v):
//
//	go test ./e2e/validation -run TestRetryBudgetScope -count=1 -v -args -scope-seeds 3
//
// Open loop, the budget bounds the storm only when shared: one-request
// clients each start with a full budget of their own and retry as if they
// had none. Closed loop, a client's budget is spent on its own calls, so
// it bounds something either way, but 90 budgets hold far more tokens
// than 4.
func TestRetryBudgetScope(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("an open-loop storm is too costly under -race")
	}
	type scope struct {
		scenario, name string
		procs          int // retrylabtest.WithProcesses (one per client: the fleet's size)
	}
	scopes := []scope{
		{"metastable", "per client", 0}, {"metastable", "per process (4)", 4},
		{"metastable-open", "per client", 1 << 20}, {"metastable-open", "per process (4)", 0},
	}
	amp := map[string][]float64{}
	rec := map[string][]bool{}
	for _, s := range scopes {
		for seed := int64(1); seed <= int64(*scopeSeeds); seed++ {
			opts := []retrylabtest.Option{retrylabtest.WithSeed(seed)}
			if s.procs > 0 {
				opts = append(opts, retrylabtest.WithProcesses(s.procs))
			}
			r := retrylabtest.Run(t, retrylabtest.Builtin(s.scenario), retrylabtest.Registered("retrylab"), opts...)
			la, rc := r.Verdict.Check(analyzer.CheckLoadAmplification), r.Verdict.Check(analyzer.CheckRecovery)
			if la == nil || rc == nil || la.Status == analyzer.StatusSkip || rc.Status == analyzer.StatusSkip {
				t.Fatalf("%s, budget %s, seed %d: load-amplification %v, recovery %v; want both judged", s.scenario, s.name, seed, la, rc)
			}
			k := s.scenario + "/" + s.name
			recovered := !(rc.Status == analyzer.StatusFail && strings.HasPrefix(rc.Reason, "metastable"))
			amp[k] = append(amp[k], la.Figure)
			rec[k] = append(rec[k], recovered)
			t.Logf("%-15s budget %-16s seed %d: load amplification %.2f×, recovered %v in %.2f s, verdict %s",
				s.scenario, s.name, seed, la.Figure, recovered, rc.Figure, r.Verdict.Status)
		}
	}
	for i := range *scopeSeeds {
		seed := i + 1
		get := func(sc, name string) (float64, bool) { return amp[sc+"/"+name][i], rec[sc+"/"+name][i] }
		oc, ocRec := get("metastable-open", "per client")
		op, opRec := get("metastable-open", "per process (4)")
		cc, ccRec := get("metastable", "per client")
		cp, cpRec := get("metastable", "per process (4)")
		where := fmt.Sprintf("seed %d", seed)
		if op > 1.5 || !opRec || oc <= 1.5 || ocRec {
			t.Errorf("%s, metastable-open: shared %.2f× (recovered %v), per client %.2f× (recovered %v); want the shared budget within 1.5× and recovering, the per-client ones neither",
				where, op, opRec, oc, ocRec)
		}
		if cp >= cc || !cpRec || !ccRec {
			t.Errorf("%s, metastable: shared %.2f× (recovered %v), per client %.2f× (recovered %v); want both recovering, the shared budget amplifying less",
				where, cp, cpRec, cc, ccRec)
		}
	}
}
