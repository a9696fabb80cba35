package validation_test

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/timeline"
)

// budgetDocPath is the document TestRetryBudgetLiterature is compared
// with, from this package.
const budgetDocPath = "../../docs/retry-budgets.md"

// regenerateBudgets is the command that rewrites docs/retry-budgets.md
// (`make validation` runs it after the matrix's).
const regenerateBudgets = "go test ./e2e/validation -run TestRetryBudgetLiterature -count=1 -args -write-budget-doc ../../docs/retry-budgets.md"

var budgetDocOut = flag.String("write-budget-doc", "", "write TestRetryBudgetLiterature's document (docs/retry-budgets.md) to this file instead of comparing it")

var budgetSeed = flag.Int64("budget-seed", 1, "the seed of TestRetryBudgetLiterature's runs; with any other, the figures are checked against the models but docs/retry-budgets.md is neither compared nor written (how the tolerances were measured)")

// The sustained-failure fleet: few clients, many requests each, because
// the retry budget is per simulated client (one Transport each) and its
// initial tokens must weigh little against what the requests earn.
const (
	budgetClients     = 2
	budgetRequests    = 1000 // logical requests per client (R)
	budgetMaxAttempts = 5    // N
	budgetDocSeed     = 1
)

// budgetShares are the shares of requests the stub answers 503, in %.
var budgetShares = []int{0, 10, 30, 50, 90, 100}

// budgetSubjects are the rows of each share: the floor, our client without
// its retry budget, our client.
var budgetSubjects = []string{"no-retry", "no-retry-budget", "retrylab"}

// Tolerances of the figures against their models: about twice the
// largest deviation seen over seeds 1-5 (-budget-seed), except
// no-retry-budget's, the 10 %, and tolFull, rounding
// (docs/benchmarks/tolerances.md has the runs).
const (
	tolNoBudget = 0.10  // relative, of the geometric sum
	tolBudget   = 0.05  // absolute, of the budget's model
	tolOK       = 0.06  // absolute, of the ok share's model
	tolFull     = 0.001 // absolute, of 1 + (Capacity/RetryCost)/R at p = 100 %
)

// sustainedFailure is the scenario: every request answered 503 (without
// Retry-After, so the client's backoff with jitter paces its retries) with
// probability SHARE %, 200 otherwise, for the whole run. MIX is the mix's
// weights; a weight must be positive, so at 0 and 100 % only one is left.
const sustainedFailure = `name: sustained-failure-SHARE
description: SHARE % of requests answered 503 without Retry-After, for the whole run
duration: 30m
server:
  latency: 1ms
  phases:
    - {name: failing, respond: {mix: {MIX}}}
fleet: {clients: CLIENTS, start: burst, requests: REQUESTS, think: 10ms, timeout: 30s}
subject: {name: retrylab, policy: {max_attempts: ATTEMPTS, base: 10ms, cap: 100ms, budget: 5s, jitter: full}}
expect: {checks: [attempts], allow_unexercised: true}
`

// sustainedFailureText is the scenario's text for share p (MIX and SHARE
// left as written when p < 0: the document's template).
func sustainedFailureText(p int) string {
	mix, share := "503: P, 200: 100-P", "P"
	switch {
	case p == 0:
		mix, share = "200: 100", "0"
	case p == 100:
		mix, share = "503: 100", "100"
	case p > 0:
		mix, share = fmt.Sprintf("503: %d, 200: %d", p, 100-p), fmt.Sprint(p)
	}
	return strings.NewReplacer("SHARE", share, "MIX", mix, "CLIENTS", fmt.Sprint(budgetClients),
		"REQUESTS", fmt.Sprint(budgetRequests), "ATTEMPTS", fmt.Sprint(budgetMaxAttempts)).Replace(sustainedFailure)
}

// geometric is the amplification without a retry budget: an attempt fails
// with probability p independently of the others, so a logical request
// makes attempt k+1 when its first k failed: Σ p^k, k = 0 … N-1, that is
// (1 - p^N)/(1 - p), and N at p = 1.
func geometric(p float64) float64 {
	if p == 1 {
		return budgetMaxAttempts
	}
	return (1 - math.Pow(p, budgetMaxAttempts)) / (1 - p)
}

// budgetModel is the amplification of a client with the default retry
// budget (the AWS rule) over R logical requests: the retries the requests
// would make without it, G - 1 per request, unless the bucket runs dry;
// then the tokens pay for them. Tokens come from the initial Capacity and
// from Refund per first-attempt success, (1 - p) R; a retry takes
// RetryCost and gets it back when it succeeds, so only the failing ones,
// a share p of the retries, keep it: retries = (Capacity + Refund (1-p) R)
// / (RetryCost p). requests ≤ 0: the steady state (R → ∞).
func budgetModel(p float64, requests int) float64 {
	if p == 0 {
		return 1
	}
	const (
		capacity = client.DefaultRetryBudgetCapacity
		cost     = client.DefaultRetryBudgetCost
		refund   = client.DefaultRetryBudgetRefund
	)
	initial := 0.0
	if requests > 0 {
		initial = capacity / float64(requests)
	}
	return 1 + min(geometric(p)-1, (initial+refund*(1-p))/(cost*p))
}

// budgetDry reports whether budgetModel has the bucket run dry: the tokens,
// not the attempts, bound the retries.
func budgetDry(p float64, requests int) bool {
	return p > 0 && budgetModel(p, requests) < geometric(p)-1e-9
}

// budgetCrossover is the failure share below which the budget's bucket
// never runs dry in steady state: refunds earned, Refund (1 - p) per
// request, match the failing retries' cost, RetryCost p (G - 1).
func budgetCrossover() float64 {
	f := func(p float64) float64 {
		return client.DefaultRetryBudgetRefund*(1-p) - client.DefaultRetryBudgetCost*p*(geometric(p)-1)
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		mid := (lo + hi) / 2
		if f(mid) > 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// expectedAmplification is the model of subject's amplification at p.
func expectedAmplification(subject string, p float64, requests int) float64 {
	switch subject {
	case "no-retry":
		return 1
	case "no-retry-budget":
		return geometric(p)
	}
	return budgetModel(p, requests)
}

// budgetCell is one run: share × subject.
type budgetCell struct {
	share    int
	subject  string
	requests int64 // logical requests (first attempts)
	attempts int64
	ok       int64
	refused  int64 // retrylab's calls that gave up before their last attempt: the budget refused a retry
}

func (c budgetCell) amplification() float64 { return float64(c.attempts) / float64(c.requests) }
func (c budgetCell) okShare() float64       { return float64(c.ok) / float64(c.requests) }

// TestRetryBudgetLiterature reproduces the qualitative result of Marc
// Brooker's retry simulations in virtual time: under sustained failure,
// backoff with jitter still multiplies the load by up to MaxAttempts, and
// a retry budget caps it near 1 + its share. A stub answers a fixed share
// p of requests 503 (0 to 100 %) for the whole run; no-retry,
// no-retry-budget and retrylab (whose default budget is the AWS SDKs'
// rule) each run 2 clients × 1000 requests at MaxAttempts 5, seed 1. It
// checks every figure against its model (geometric, budgetModel) within
// the measured tolerances, that the budget refuses retries exactly where
// its model runs dry, then renders the table and compares it with
// docs/retry-budgets.md; -write-doc FILE writes it instead:
//
//	go test ./e2e/validation -run TestRetryBudgetLiterature -count=1 -args -write-budget-doc ../../docs/retry-budgets.md
func TestRetryBudgetLiterature(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("figures compared with docs/retry-budgets.md, not races: make matrix runs it without the race detector")
	}
	var mu sync.Mutex
	cells := map[string]budgetCell{}
	key := func(p int, s string) string { return fmt.Sprintf("%d/%s", p, s) }
	open := map[string]openCell{}
	t.Run("cells", func(t *testing.T) {
		// The open-loop rows (docs/retry-budgets.md's last table): a storm
		// costs seconds of CPU a run, too costly under -race.
		for _, load := range slices.Backward(openLoads) {
			for _, subj := range budgetSubjects {
				t.Run(fmt.Sprintf("open%d/%s", load, subj), func(t *testing.T) {
					if testenv.RaceEnabled {
						t.Skip("an open-loop storm is too costly under -race: make matrix runs it")
					}
					t.Parallel()
					c := runOpenCell(t, load, subj)
					mu.Lock()
					open[openKey(load, subj)] = c
					mu.Unlock()
				})
			}
		}
		// The costliest cells (most attempts: the highest shares) first, so
		// that none of them is left running alone at the end.
		for _, p := range slices.Backward(budgetShares) {
			for _, subj := range slices.Backward(budgetSubjects) {
				t.Run(fmt.Sprintf("p%d/%s", p, subj), func(t *testing.T) {
					t.Parallel()
					c := runBudgetCell(t, p, subj)
					mu.Lock()
					cells[key(p, subj)] = c
					mu.Unlock()
				})
			}
		}
	})
	checkOpenCells(t, open)
	if len(cells) != len(budgetShares)*len(budgetSubjects) {
		t.Logf("%d of %d cells ran (a -run filter?): docs/retry-budgets.md not compared", len(cells), len(budgetShares)*len(budgetSubjects))
		return
	}
	for _, p := range budgetShares {
		x := float64(p) / 100
		for _, subj := range budgetSubjects {
			c := cells[key(p, subj)]
			a, want := c.amplification(), expectedAmplification(subj, x, budgetRequests)
			switch subj {
			case "no-retry":
				if c.attempts != c.requests {
					t.Errorf("no-retry at p = %d%%: %d attempts for %d requests; want one each", p, c.attempts, c.requests)
				}
			case "no-retry-budget":
				if math.Abs(a-want) > tolNoBudget*want {
					t.Errorf("no-retry-budget at p = %d%%: amplification = %.3f; want the geometric sum %.3f ± %.0f%%", p, a, want, 100*tolNoBudget)
				}
				if p == 100 && math.Abs(a-budgetMaxAttempts) > tolNoBudget*budgetMaxAttempts {
					t.Errorf("no-retry-budget at p = 100%%: amplification = %.3f; want MaxAttempts (%d) ± %.0f%%", a, budgetMaxAttempts, 100*tolNoBudget)
				}
			case "retrylab":
				if math.Abs(a-want) > tolBudget {
					t.Errorf("retrylab at p = %d%%: amplification = %.3f; want the budget's model %.3f ± %.3f", p, a, want, tolBudget)
				}
				if nb := cells[key(p, "no-retry-budget")].amplification(); a > nb+tolBudget {
					t.Errorf("retrylab at p = %d%%: amplification = %.3f, above no-retry-budget's %.3f", p, a, nb)
				}
				if dry := budgetDry(x, budgetRequests); dry != (c.refused > 0) {
					t.Errorf("retrylab at p = %d%%: %d calls refused a retry; want some exactly where the model runs the bucket dry (%v)", p, c.refused, dry)
				}
			}
			if ok, wantOK := c.okShare(), (1-x)*want; math.Abs(ok-wantOK) > tolOK {
				t.Errorf("%s at p = %d%%: ok share = %.3f; want (1 - p) × the expected amplification, %.3f ± %.2f", subj, p, ok, wantOK, tolOK)
			}
			t.Logf("p = %3d%% %-16s amplification %.4f (model %.4f, %+.4f), ok %.4f (model %.4f, %+.4f), refused %d",
				p, subj, a, want, a-want, c.okShare(), (1-x)*want, c.okShare()-(1-x)*want, c.refused)
		}
	}
	// The bound: at total failure, the budget pays for its initial
	// tokens' retries (Capacity / RetryCost per client) and no more.
	full := cells[key(100, "retrylab")].amplification()
	if bound := 1 + float64(client.DefaultRetryBudgetCapacity/client.DefaultRetryBudgetCost)/budgetRequests; full > bound+tolFull {
		t.Errorf("retrylab at p = 100%%: amplification = %.3f; want ≤ 1 + (%d retries per client)/(%d requests per client) = %.3f",
			full, client.DefaultRetryBudgetCapacity/client.DefaultRetryBudgetCost, budgetRequests, bound)
	}
	if t.Failed() {
		return
	}
	if len(open) != len(openLoads)*len(budgetSubjects) {
		t.Logf("%d of %d open-loop cells ran (a -run filter, or -race): docs/retry-budgets.md not compared", len(open), len(openLoads)*len(budgetSubjects))
		return
	}
	if *budgetSeed != budgetDocSeed {
		t.Logf("seed %d: docs/retry-budgets.md (seed %d) not compared", *budgetSeed, budgetDocSeed)
		return
	}
	doc := budgetMarkdown(cells, key, open)
	if *budgetDocOut != "" {
		if err := os.WriteFile(*budgetDocOut, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	compareDoc(t, budgetDocPath, doc, regenerateBudgets)
}

// runBudgetCell runs subject against the sustained-failure scenario at
// share p and counts what the table needs.
func runBudgetCell(t *testing.T, p int, subject string) budgetCell {
	t.Helper()
	sc, err := scenarios.Parse(fmt.Sprintf("sustained-failure-%d.yaml", p), []byte(sustainedFailureText(p)))
	if err != nil {
		t.Fatal(err)
	}
	res := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered(subject), retrylabtest.WithSeed(*budgetSeed))
	s, f := res.Summary, res.Verdict.Figures
	planned := int64(budgetClients * budgetRequests)
	if s.Stopped != runner.StoppedDone || s.Planned != planned || s.Requests != planned || f.Requests != planned {
		t.Fatalf("run stopped %q with %d of %d logical requests ended, %d first attempts; want every request made and ended",
			s.Stopped, s.Requests, planned, f.Requests)
	}
	if v := res.Verdict; v.Status == analyzer.VerdictInconclusive || len(v.Failed()) > 0 {
		t.Errorf("verdict %s, failed %v (%s); want the attempts check to pass: no call beyond MaxAttempts", v.Status, v.Failed(), strings.Join(v.Inconclusive, "; "))
	}
	c := budgetCell{share: p, subject: subject, requests: f.Requests, attempts: f.Attempts, ok: f.Results[timeline.ResultOK]}
	if subject != "retrylab" {
		return c // no retry budget to refuse a retry (and a pass over the timeline saved)
	}
	dec := timeline.NewDecoder(bytes.NewReader(res.Timeline))
	var rec timeline.Record
	for dec.Decode(&rec) == nil {
		if rec.Type == timeline.TypeOutcome && rec.Outcome.Result == timeline.ResultGaveUp && rec.Outcome.Attempts < budgetMaxAttempts {
			c.refused++
		}
	}
	return c
}

// budgetMarkdown renders docs/retry-budgets.md from the cells.
func budgetMarkdown(cells map[string]budgetCell, key func(int, string) string, open map[string]openCell) []byte {
	var b bytes.Buffer
	n := budgetMaxAttempts
	perClient := client.DefaultRetryBudgetCapacity / client.DefaultRetryBudgetCost
	crossover := budgetCrossover()
	b.WriteString("# Retry budgets against the literature\n\n")
	fmt.Fprintf(&b, "Under sustained failure, backoff with jitter spreads retries in time but does\n"+
		"not make them fewer: a client that retries every failure multiplies the load\n"+
		"by up to MaxAttempts. A retry budget caps it near 1 + the share of retries it\n"+
		"allows, whatever the failure rate (with ours, in steady state, at most %.3f×,\n"+
		"and %.3f× at total failure). This is the qualitative result of Marc Brooker's\n"+
		"retry simulations; the table below reproduces it with our client (`retrylab`,\n"+
		"whose retry budget is on by default: the AWS SDKs' rule, see client/README.md,\n"+
		"\"Retry storms: the client's retry budget\"), the same client with its budget off\n"+
		"(`no-retry-budget`) and, as the floor, `no-retry`. The figures are from runs\n"+
		"in virtual time, and `TestRetryBudgetLiterature`\n"+
		"(e2e/validation/budget_test.go) checks each against its model and this\n"+
		"file against the runs.\n\n", budgetModel(crossover, 0), budgetModel(1, 0))

	b.WriteString("## What was run\n\n")
	fmt.Fprintf(&b, "A stub answers each request 503 with probability p, 200 otherwise, for the\n"+
		"whole run, without `Retry-After` (so the client's own backoff with full jitter\n"+
		"paces its retries), for p = %s %%.\n"+
		"Each subject runs the same fleet, %d clients × %d logical requests (R = %d per\n"+
		"client, 10 ms apart), MaxAttempts N = %d, seed %d, in virtual time\n"+
		"(`retrylabtest.Run`). The budget is per simulated\n"+
		"client (a Transport each), so the fleet has few clients with many requests\n"+
		"each: the steady state weighs more than the %d tokens each budget starts\n"+
		"with. The scenario (P is the share in %%; at 0 and 100 %% only the nonzero\n"+
		"weight is written):\n\n", joinInts(budgetShares), budgetClients, budgetRequests, budgetRequests, n,
		budgetDocSeed, client.DefaultRetryBudgetCapacity)
	b.WriteString("```yaml\n" + sustainedFailureText(-1) + "```\n\n")
	b.WriteString("Regenerate this file with `make validation`, or alone:\n\n    " + regenerateBudgets + "\n\n")
	fmt.Fprintf(&b, "Amplification is attempts ÷ logical requests (the analyzer's figures); ok is the\n"+
		"share of logical requests that ended with a 200; refused counts the calls that\n"+
		"gave up before their N-th attempt because the budget refused a retry (— where\n"+
		"there is no budget).\n\n")

	b.WriteString("## The table\n\n")
	b.WriteString("| p (503s) | subject | attempts | amplification | expected | expected as R → ∞ | refused | ok | expected ok |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range budgetShares {
		x := float64(p) / 100
		for _, s := range budgetSubjects {
			c := cells[key(p, s)]
			want := expectedAmplification(s, x, budgetRequests)
			refused := "—"
			if s == "retrylab" {
				refused = fmt.Sprint(c.refused)
			}
			fmt.Fprintf(&b, "| %d %% | `%s` | %d | %.3f× | %.3f× | %.3f× | %s | %.1f %% | %.1f %% |\n",
				p, s, c.attempts, c.amplification(), want, expectedAmplification(s, x, 0), refused,
				100*c.okShare(), 100*(1-x)*want)
		}
	}
	nb, rl := cells[key(100, "no-retry-budget")], cells[key(100, "retrylab")]
	nb90, rl90 := cells[key(90, "no-retry-budget")], cells[key(90, "retrylab")]
	nb50, rl50 := cells[key(50, "no-retry-budget")], cells[key(50, "retrylab")]

	b.WriteString("\n## The formulas\n\n")
	fmt.Fprintf(&b, "Each attempt fails with probability p, independently of the others.\n\n"+
		"- **Without a budget** (`no-retry-budget`) a logical request makes attempt k + 1\n"+
		"  when its first k failed: amplification G = 1 + p + … + p^(N-1) = (1 - p^N)/(1 - p),\n"+
		"  N at p = 1. (Brooker counts N retries, hence his 1 + N; our N counts attempts.)\n"+
		"- **With the budget** (`retrylab`, the AWS rule: %d tokens per client, a retry\n"+
		"  takes %d, a call that ends with a response it does not retry gives back its\n"+
		"  last retry's cost, or %d after a first-attempt success). A retry that\n"+
		"  succeeds gets its tokens back, so only failing retries, a share p of the\n"+
		"  retries, spend them; the tokens come from the %d the bucket starts with and\n"+
		"  from %d per first-attempt success, (1 - p) R of them. Once the bucket runs\n"+
		"  dry, retries ≈ (%d + %d (1 - p) R) / (%d p) per client, so\n\n"+
		"      A = 1 + min(G - 1, (%d/R + %d (1 - p)) / (%d p))\n\n"+
		"  (the first term where the bucket never runs dry). At p = 1 that is\n"+
		"  1 + %d/R: the %d retries the initial tokens pay for, and no more. As R → ∞,\n"+
		"  A → 1 + min(G - 1, (1 - p)/(%d p)): failing retries are at most 1 per %d\n"+
		"  first-attempt successes. Below p* ≈ %.1f %%, where %d (1 - p) = %d p (G - 1),\n"+
		"  first-attempt successes earn more than failing retries cost: the bucket\n"+
		"  never runs dry and the budgeted client is the unbudgeted one (the rows at\n"+
		"  10 and 30 %%). At p* the budgeted amplification is highest, %.3f× in steady\n"+
		"  state; at 50 %% it is %.3f×. Counting every retry as spending %d tokens\n"+
		"  would give 1 + (%d/R + (1 - p))/%d, %.3f× at 50 %% and R = %d, against A's\n"+
		"  %.3f× and the runs' %.3f×: free successful retries add the factor 1/p.\n"+
		"- **ok share**: every attempt succeeds with probability 1 - p and a success\n"+
		"  ends its request, so ok = (1 - p) × A for all three.\n\n",
		client.DefaultRetryBudgetCapacity, client.DefaultRetryBudgetCost, client.DefaultRetryBudgetRefund,
		client.DefaultRetryBudgetCapacity, client.DefaultRetryBudgetRefund,
		client.DefaultRetryBudgetCapacity, client.DefaultRetryBudgetRefund, client.DefaultRetryBudgetCost,
		client.DefaultRetryBudgetCapacity, client.DefaultRetryBudgetRefund, client.DefaultRetryBudgetCost,
		client.DefaultRetryBudgetCapacity, perClient,
		client.DefaultRetryBudgetCost, client.DefaultRetryBudgetCost/client.DefaultRetryBudgetRefund,
		100*crossover, client.DefaultRetryBudgetRefund, client.DefaultRetryBudgetCost,
		budgetModel(crossover, 0),
		budgetModel(0.5, 0),
		client.DefaultRetryBudgetCost, client.DefaultRetryBudgetCapacity, client.DefaultRetryBudgetCost,
		1+(float64(client.DefaultRetryBudgetCapacity)/budgetRequests+(1-0.5))/client.DefaultRetryBudgetCost, budgetRequests,
		budgetModel(0.5, budgetRequests), rl50.amplification())

	b.WriteString("## What the test asserts\n\n")
	fmt.Fprintf(&b, "- `no-retry`: exactly one attempt per request.\n"+
		"- `no-retry-budget`: amplification within %.0f %% of G at every p, and of N at\n"+
		"  p = 100 %%.\n"+
		"- `retrylab`: amplification within %.3f of A at every p, never above\n"+
		"  `no-retry-budget`'s, at most 1 + %d/%d (+ %.3f, rounding) at p = 100 %%,\n"+
		"  and retries refused exactly at the shares where A's bucket runs dry.\n"+
		"- every ok share within %.2f of (1 - p) × the expected amplification; every\n"+
		"  run made and ended all its requests, no call beyond N attempts.\n\n"+
		"The tolerances are about twice the largest deviation measured over seeds 1-5\n"+
		"(`-args -budget-seed N` runs the checks with another seed, without this\n"+
		"file); the 10 %% for G is the issue's, looser than what the runs show. A run in\n"+
		"virtual time replays exactly with its seed, so this file is compared byte for\n"+
		"byte.\n\n", 100*tolNoBudget, tolBudget, perClient, budgetRequests, tolFull, tolOK)

	b.WriteString("## Compared with Brooker\n\n")
	fmt.Fprintf(&b, "Brooker's simulations in \"Fixing retries with token buckets and circuit\n"+
		"breakers\" (https://brooker.co.za/blog/2022/02/28/retries.html, 2022) compare,\n"+
		"as the downstream failure rate grows, no retries, a fixed number of retries\n"+
		"and an adaptive retry token bucket (successes deposit part of a\n"+
		"token, retries spend whole ones). Fixed retries drive the work toward 1 + N\n"+
		"times the offered load as failures become total; the token bucket behaves like\n"+
		"fixed retries while failures are rare and like a small fraction of a retry per\n"+
		"call once they are common, so the load stays near 1× plus the bucket's\n"+
		"deposit rate. \"Timeouts, retries and backoff with jitter\" (Amazon Builders'\n"+
		"Library, https://aws.amazon.com/builders-library/timeouts-retries-and-backoff-with-jitter/)\n"+
		"makes the general case that retries add load to a system that is already\n"+
		"failing, and that backoff and jitter spread that load in time.\n\n"+
		"Our runs show the same shape. Without the budget, jittered backoff still sends\n"+
		"%.3f× the offered load at p = 100 %% (N = %d) and %.3f× at 90 %%, as G says; with\n"+
		"it, %.3f× and %.3f×, and %.3f× against %.3f× at 50 %%. Below p* ≈ %.0f %% the two\n"+
		"clients are the same, as Brooker's bucket behaves like N retries at low failure\n"+
		"rates. Two differences from his bucket, both visible in A: the AWS rule gives a\n"+
		"successful retry its tokens back, so retries that succeed are free and the\n"+
		"crossover is at p* rather than near the deposit rate; and the bucket starts\n"+
		"full, so a client's first %d retries are paid for in advance: at R = %d they\n"+
		"are the %.3f above 1 at p = 100 %%, and they vanish as R grows. Like his model,\n"+
		"this one has a failure rate that does not depend on the load; what the extra\n"+
		"load does to a server of finite capacity is the last table, below, and the\n"+
		"metastable scenarios' rows in [validation.md](validation.md).\n",
		nb.amplification(), n, nb90.amplification(), rl.amplification(), rl90.amplification(),
		rl50.amplification(), nb50.amplification(), 100*crossover,
		perClient, budgetRequests, rl.amplification()-1)
	openMarkdown(&b, open)
	return b.Bytes()
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
