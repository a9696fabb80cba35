package subjects_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
)

// budgetProbe is the retrylab subject with an Observer on each simulated
// client's Transport that keeps the lowest level its retry budget reached
// and the retries it refused. It maps the Policy as retrylab does, and
// TestRetryBudgetHeadroom checks that it behaves identically (the same
// timeline).
type budgetProbe struct {
	ref subjects.Subject

	mu      sync.Mutex
	lowest  int // the lowest level any client's budget reached
	refused int
}

type probeObserver struct {
	client.NopObserver
	p *budgetProbe
}

func (o probeObserver) RetryBudget(e client.RetryBudgetEvent) {
	o.p.mu.Lock()
	defer o.p.mu.Unlock()
	o.p.lowest = min(o.p.lowest, e.Tokens)
	if e.Refused {
		o.p.refused++
	}
}

func (p *budgetProbe) Name() string { return "retrylab" }

func (p *budgetProbe) Describe(pp subjects.Params) subjects.Info {
	return p.ref.(subjects.Describer).Describe(pp)
}

func (p *budgetProbe) New(next http.RoundTripper, pp subjects.Params) subjects.Caller {
	j, _ := client.ParseJitter(pp.Policy.Jitter)
	t := client.New(subjects.Counting(next), client.Config{
		Base: pp.Policy.Base, Cap: pp.Policy.Cap, Jitter: j, MaxAttempts: pp.Policy.MaxAttempts,
		Budget: pp.Policy.Budget, AttemptTimeout: pp.Policy.Timeout, Rate: pp.Policy.Rate, Burst: pp.Policy.Burst,
		AddIdempotencyKey: true, ClaimWaits: true, Rand: pp.Rand, Observer: probeObserver{p: p},
	})
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		ctx, c := subjects.WithCounter(ctx)
		resp, err := t.RoundTrip(req.WithContext(ctx))
		c.Finish(resp)
		return resp, err
	}
}

// drainedByDesign are the built-in scenarios whose sustained overload is
// there to drain the retry budget.
var drainedByDesign = map[string]bool{"metastable": true, "metastable-open": true}

// TestRetryBudgetHeadroom measures what the reference client's default
// retry budget (one per simulated client, 500 tokens) is left with in
// each built-in scenario, at its full fleet, seeds 1-3 (1 under -race): no retry is refused
// anywhere and no client's budget falls below half, so the budget, on by
// default, changes no verdict of these scenarios (the validation matrix
// checks the verdicts). The lowest levels are logged (-v).
func TestRetryBudgetHeadroom(t *testing.T) {
	if testing.Short() {
		t.Skip("plays every built-in scenario at its full fleet")
	}
	ref, err := subjects.Lookup("retrylab")
	if err != nil {
		t.Fatal(err)
	}
	seeds := int64(3)
	if testenv.RaceEnabled {
		seeds = 1 // the race detector makes the 60 runs take half a minute
	}
	for _, sc := range scenarios.BuiltinNamesOf("http") {
		if drainedByDesign[sc] {
			continue
		}
		t.Run(sc, func(t *testing.T) {
			for seed := int64(1); seed <= seeds; seed++ {
				p := &budgetProbe{ref: ref, lowest: client.DefaultRetryBudgetCapacity}
				got := retrylabtest.Run(t, retrylabtest.Builtin(sc), retrylabtest.Client(p), retrylabtest.WithSeed(seed))
				want := retrylabtest.Run(t, retrylabtest.Builtin(sc), retrylabtest.Registered("retrylab"), retrylabtest.WithSeed(seed))
				if got.Hash != want.Hash {
					t.Fatalf("seed %d: the probe's timeline differs from retrylab's (hash %s vs %s): it no longer maps the Policy as retrylab does", seed, got.Hash, want.Hash)
				}
				t.Logf("%s seed %d: lowest retry budget of any of %d clients %d of %d, %d retries refused; %d attempts",
					sc, seed, got.Summary.Clients, p.lowest, client.DefaultRetryBudgetCapacity, p.refused, got.Verdict.Figures.Attempts)
				if p.refused > 0 || p.lowest < client.DefaultRetryBudgetCapacity/2 {
					t.Errorf("%s seed %d: lowest level %d, %d retries refused; want no refusal and at least %d left: the default budget would touch this scenario",
						sc, seed, p.lowest, p.refused, client.DefaultRetryBudgetCapacity/2)
				}
			}
		})
	}
}
