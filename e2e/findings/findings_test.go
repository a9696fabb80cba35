package findings

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/internal/doccheck"
	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
	_ "github.com/retrylab/retrylab/subjects/thirdparty" // the libraries compared
	"github.com/retrylab/retrylab/timeline"
)

var writeDoc = flag.String("write-doc", "", "write the findings as Markdown to this file (docs/libraries.md) instead of comparing them with it")

// docPath is the document the findings are compared with, from this package.
const docPath = "../../docs/libraries.md"

// regenerate is the command that writes docs/libraries.md (`make libraries`).
const regenerate = "go test ./e2e/findings -run TestLibraries -count=1 -args -write-doc ../../docs/libraries.md"

// seeds are the seeds every library × scenario runs with.
var seeds = []int64{1, 2, 3}

// libraries are the subjects judged: the reference client first, then the
// real third-party libraries at their defaults.
var libraries = []string{"retrylab", "retryablehttp", "backoff", "failsafe", "resty", "retry-go", "go-retry"}

// scenarioNames are the built-in scenarios they are run through.
var scenarioNames = []string{"outage-delta", "outage-date", "outage-bare", "malformed-retry-after", "budget-trip", "metastable", "metastable-open"}

// raceScenarios are the scenarios run under -race, one seed each: a
// race is the adapter's code, not the scenario's, and these two take
// every library through a Retry-After date and through its budget's end.
// `make check` runs TestLibraries once more without -race (`make matrix`):
// every scenario and seed, and the document compared. The others cost
// too much there: metastable's overload turns failsafe-go's calls into
// storms of instant retries (33,751 attempts a run), metastable-open's
// open-loop arrivals into storms of every library (up to 5 attempts a
// call).
var raceScenarios = map[string]bool{"outage-date": true, "budget-trip": true}

// fact is what a run was observed to show on every seed tried (1-3), for
// libraries with a global random source as well: the exact set of failed
// checks, and optionally that every logical request ended with one result
// and that every retry was early.
type fact struct {
	subject, scenario string
	failed            []string
	allResult         string // every outcome has this result ("" = not asserted)
	everyRetryEarly   bool   // retry-after's figure equals the number of retries
}

// facts are asserted on every seed: one or two per library, each a
// finding of docs/libraries.md that holds whatever the jitter draws.
var facts = []fact{
	{subject: "retrylab", scenario: "outage-date", allResult: "ok"},
	{subject: "retryablehttp", scenario: "outage-date", allResult: "ok"},
	{subject: "retryablehttp", scenario: "budget-trip", failed: []string{analyzer.CheckBudget}, allResult: "hung"},
	{subject: "backoff", scenario: "outage-delta", failed: []string{analyzer.CheckRetryAfter}, allResult: "ok"},
	{subject: "failsafe", scenario: "outage-date", failed: []string{analyzer.CheckRetryAfter, analyzer.CheckGiveUp}, allResult: "gave-up", everyRetryEarly: true},
	{subject: "resty", scenario: "outage-delta", failed: []string{analyzer.CheckRetryAfter, analyzer.CheckGiveUp}, allResult: "gave-up", everyRetryEarly: true},
	{subject: "retry-go", scenario: "outage-delta", failed: []string{analyzer.CheckRetryAfter}, allResult: "ok"},
	{subject: "go-retry", scenario: "outage-bare", failed: []string{analyzer.CheckWaves}, allResult: "ok"},
	{subject: "failsafe", scenario: "metastable", failed: []string{analyzer.CheckRecovery, analyzer.CheckWastedWork}},
	{subject: "retryablehttp", scenario: "metastable", failed: []string{analyzer.CheckBudget}},
	// Open loop: resty, which passes metastable by giving up fast, keeps
	// the server down there: its 4 quick attempts a call multiply
	// arrivals that do not slow down.
	{subject: "resty", scenario: "metastable-open", failed: []string{analyzer.CheckRecovery, analyzer.CheckLoadAmplification, analyzer.CheckWastedWork}},
	{subject: "failsafe", scenario: "metastable-open", failed: []string{analyzer.CheckRecovery, analyzer.CheckLoadAmplification, analyzer.CheckWastedWork}},
}

// causes are what reading each library's source (the pinned version, in
// the module cache) showed to be behind a failed check: subject/check, or
// subject/scenario/check when the cause depends on the scenario. The
// document prints a cause only beside a failure the runs showed, and
// TestLibraries fails when a cause explains a failure no run shows (a
// fixed bug, a renamed check): see checkExplanations.
var causes = map[string]string{
	"retryablehttp/waves": "`DefaultBackoff` (client.go) waits `RetryWaitMin·2ⁿ` capped at `RetryWaitMax` with no jitter when there is no usable Retry-After " +
		"(`LinearJitterBackoff` is opt-in): every client waits exactly 1 s, 2 s, 4 s, 8 s.",
	"retryablehttp/budget": "`DefaultBackoff` returns the parsed Retry-After (`parseRetryAfterHeader`, client.go) as is, not capped by `RetryWaitMax`, " +
		"and there is no time budget: the client sleeps the one-year delay-seconds value until the harness's watchdog cancels it.",
	"backoff/retry-after": "backoff knows nothing of HTTP; the user code, as in the library's own example (example_test.go), turns Retry-After into " +
		"`backoff.RetryAfter` only on a 429 and only as delay-seconds. These scenarios send 503s, so their Retry-After is never read and " +
		"the retries follow the default backoff (500 ms ×1.5 per retry, ±50%).",
	"backoff/amplification": "no attempt cap by default (`MaxTries` 0; only the 15-minute `MaxElapsedTime` stops it), so it keeps retrying " +
		"through the outage; with no stated `max_attempts` the threshold is the analyzer's default, 5.",
	"backoff/malformed-retry-after/budget": "the default `MaxElapsedTime` is 15 minutes; a request whose 8th attempt lands just before " +
		"the service recovers at 12 s draws its next wait from 0.5 s·1.5⁷ ±50% (4.3-12.8 s), which can run past the scenario's 20 s " +
		"watchdog (seen in a run traced by hand: last 503 at 11.5 s, no further attempt by 20.4 s).",
	"backoff/budget": "the default `MaxElapsedTime` is 15 minutes, longer than the scenario's watchdog (`fleet.timeout`): the call was still " +
		"retrying when the watchdog fired.",
	"failsafe/retry-after": "`failsafehttp.DelayFunc` (failsafehttp/policy.go) reads Retry-After with `strconv.Atoi` only: an HTTP-date does not " +
		"parse, it returns -1, and the retry policy falls back to its default delay, 0 — the retries go out at once.",
	"failsafe/instant-retry": "the default retry policy has no delay (`Delay` 0) and no jitter: without a delay-seconds Retry-After both retries " +
		"follow the 503 at once.",
	"failsafe/budget": "`DelayFunc` uses a delay-seconds value as is, and the retry policy has no max delay or max duration by default " +
		"(retrypolicy/retryexecutor.go): the client sleeps the one-year Retry-After until the harness's watchdog cancels it.",
	"failsafe/give-up": "the default retry policy allows 2 retries (`defaultMaxRetries`, retrypolicy/retry.go), 3 attempts in all, with no delay " +
		"of its own: sent at once, or paced by a delay-seconds Retry-After of 2-3 s, they are spent before the outage ends.",
	"resty/give-up": "`SetRetryCount(3)` gives 4 attempts whose waits (`jitterBackoff`, see `retry-after`) end within 0.7 s, inside every outage " +
		"of these scenarios: requests a client that waited out the outage would have saved.",
	"resty/retry-after": "resty v2 reads Retry-After only through a user-set `RetryAfter` callback (`SetRetryAfter`); with none, " +
		"`sleepDuration` (retry.go) uses `jitterBackoff`: for retry n = 0, 1, 2 a draw in [w/2, w) with w = min(2 s, 100 ms·2ⁿ), " +
		"raised to at least 100 ms — 100 ms, 100-200 ms, 200-400 ms. Its 4 attempts end within 0.7 s.",
	"retry-go/retry-after": "retry-go knows nothing of HTTP and the user code does not read Retry-After; its default delay is " +
		"`CombineDelay(BackOffDelay, RandomDelay)`: 100 ms·2ⁿ⁻¹ plus a random 0-100 ms.",
	"retry-go/waves": "the default delay `CombineDelay(BackOffDelay, RandomDelay)` (retry.go, options.go) adds at most `MaxJitter` = 100 ms to " +
		"an exponential wait that reaches 6.4 s by retry 7: jitter narrow compared with the wait, so the fleet's later retries come back together.",
	"retry-go/budget": "no time budget; its 10-attempt schedule (100 ms·2ⁿ⁻¹ + ≤100 ms, about 51 s in all) outlasts the scenario's watchdog: " +
		"the call was still retrying when it fired.",
	"go-retry/retry-after": "go-retry knows nothing of HTTP and the user code (the README's wiring) does not read Retry-After: it waits 1 s, 2 s, 4 s, 8 s.",
	"go-retry/waves": "`NewExponential` (backoff_exponential.go) has no jitter unless wrapped in `WithJitter`/`WithJitterPercent`: every " +
		"client waits exactly 1 s, 2 s, 4 s, 8 s.",
	"failsafe/metastable/recovery": "with the application's 30 ms per-attempt timeout (a failsafe-go timeout policy inside the retry policy), " +
		"a timed-out attempt is retried at once, twice (no delay, no jitter, 3 attempts): under the trigger every call sends 3 requests " +
		"within 90 ms, the queue stays full after the workers are back, and the server does not recover before the run ends.",
	"failsafe/metastable/wasted-work": "its instant retries keep the queue full of requests whose 30 ms timeout has passed: most of the " +
		"service goes to clients that have gone.",
	"retryablehttp/metastable/budget": "no time budget: a call whose attempts time out waits 1 s, 2 s, 4 s (`DefaultBackoff`), " +
		"which outlasts the scenario's 3 s watchdog (`fleet.timeout`): those calls were still retrying when it fired. Its " +
		"1 s base wait is long enough for the queue to drain, so the server recovers.",
	"backoff/metastable/budget": "the default `MaxElapsedTime` is 15 minutes and there is no attempt cap: calls whose attempts keep " +
		"timing out during the trigger were still retrying when the scenario's 3 s watchdog fired.",
	"retry-go/metastable/budget": "no time budget: its 10-attempt schedule outlasts the scenario's 3 s watchdog for calls whose " +
		"attempts keep timing out during the trigger.",
	"go-retry/metastable/budget": "no time budget: its waits (1 s, 2 s, 4 s, 8 s) outlast the scenario's 3 s watchdog for calls whose " +
		"attempts time out during the trigger.",
	"resty/metastable-open/load-amplification": "no retry budget: every call that meets the overload makes its 4 attempts " +
		"(`SetRetryCount(3)`) within 0.7 s, and in the open loop new calls keep arriving at the same rate while they do, so the server " +
		"gets up to 4× its offered load; in the closed loop the same quick give-up made each client send less while the server was slow.",
	"resty/metastable-open/recovery": "its retries alone, up to 3 per arrival, are more than the 25 % of headroom the server has at 80 % " +
		"load: the queue stays full after the workers are back.",
	"failsafe/metastable-open/load-amplification": "no retry budget: the default policy's 2 instant retries (no delay) after each " +
		"200 ms timeout make every arriving call 3 requests while the queue is full.",
	"retryablehttp/metastable-open/load-amplification": "no retry budget: a call whose first attempt times out retries after 1 s " +
		"(`DefaultBackoff`), once within the 2 s watchdog, so arrivals during and after the trigger count about twice.",
	"go-retry/metastable-open/load-amplification": "no retry budget: its first retry, 1 s after a timed-out attempt, fits " +
		"within the 2 s watchdog, so arrivals during and after the trigger count about twice.",
	"backoff/metastable-open/load-amplification": "no retry budget and no attempt cap: retries 0.5 s ×1.5ⁿ ±50 % apart until " +
		"the 2 s watchdog, about 3 attempts a call once the queue is full.",
	"retry-go/metastable-open/load-amplification": "no retry budget: its schedule (100 ms·2ⁿ⁻¹ + ≤100 ms) fits 5 attempts within " +
		"the 2 s watchdog, so every arrival that meets the full queue counts 4 to 5 times.",
	"go-retry/budget": "no time budget; its waits (1 + 2 + 4 + 8 s = 15 s) outlast the scenario's 10 s watchdog: the call was still retrying when it fired.",
}

// outcomeNotes explain, from the source, runs in which no logical request
// ended ok (printed only when that is what the run shows, and a note no
// run bears out fails TestLibraries): subject/scenario.
var outcomeNotes = map[string]string{
	"failsafe/outage-date":           "3 attempts at once (see `retry-after` above) all land in the 5 s outage.",
	"failsafe/outage-bare":           "3 attempts at once (see `instant-retry` above) all land in the 8 s outage.",
	"failsafe/malformed-retry-after": "none of the broken values is a delay-seconds `DelayFunc` accepts except the negative one (`Atoi(\"-1\")` gives a negative delay, clamped to 0), so the 3 attempts go out at once, within the 12 s of 503s.",
	"resty/outage-delta":             "its 4 attempts end within 0.7 s (see `retry-after` above), inside the 6 s outage.",
	"resty/outage-date":              "its 4 attempts end within 0.7 s (see `retry-after` above), inside the 5 s outage.",
	"resty/outage-bare":              "its 4 attempts end within 0.7 s, inside the 8 s outage.",
	"resty/malformed-retry-after":    "its 4 attempts end within 0.7 s, inside the 12 s of 503s.",
}

// run is one library × scenario × seed.
type run struct {
	subject, scenario string
	seed              int64
	version, summary  string
	verdict           *analyzer.Verdict
	results           map[string]int64
	requests          int64
}

// TestLibraries runs real third-party retry libraries (and retrylab as
// the reference) at their defaults through the outage and malformed
// Retry-After scenarios in virtual time, every library × scenario × seeds
// 1-3, runs in parallel. It asserts the facts, checks every explanation
// against the runs it explains, and compares the document the runs make
// with docs/libraries.md; -write-doc FILE writes it instead:
//
//	go test ./e2e/findings -run TestLibraries -count=1 -args -write-doc ../../docs/libraries.md
//
// backoff, resty and retry-go draw jitter from the global math/rand, so
// their figures change from one run to the next: their rows and sections
// are left out of the comparison (see stableView), the rest must match
// byte for byte.
func TestLibraries(t *testing.T) {
	var mu sync.Mutex
	var runs []run
	t.Run("runs", func(t *testing.T) {
		for _, sc := range scenarioNames {
			for _, subj := range libraries {
				f, isFact := findFact(subj, sc)
				for _, seed := range seeds {
					t.Run(fmt.Sprintf("%s/%s/seed%d", sc, subj, seed), func(t *testing.T) {
						if testenv.RaceEnabled && !raceScenarios[sc] {
							t.Skipf("under -race only %s run: make matrix runs %s without it", strings.Join(slices.Sorted(maps.Keys(raceScenarios)), " and "), sc)
						}
						if testenv.RaceEnabled && seed != seeds[0] {
							t.Skip("under -race one seed a run (a race is the code's, not the seed's): make matrix runs every seed")
						}
						t.Parallel()
						res := retrylabtest.Run(t, retrylabtest.Builtin(sc), retrylabtest.Registered(subj), retrylabtest.WithSeed(seed))
						r := run{subject: subj, scenario: sc, seed: seed, verdict: res.Verdict,
							results: res.Verdict.Figures.Results, requests: res.Verdict.Figures.Outcomes}
						r.version, r.summary = describe(t, subj, res.Timeline)
						mu.Lock()
						runs = append(runs, r)
						mu.Unlock()
						if isFact {
							checkFact(t, f, r)
						}
					})
				}
			}
		}
	})
	if want := len(scenarioNames) * len(libraries) * len(seeds); len(runs) != want {
		why := "a -run filter?"
		if testenv.RaceEnabled {
			why = "under -race only the runs of " + strings.Join(slices.Sorted(maps.Keys(raceScenarios)), ", ") + "; make matrix checks them all"
		}
		t.Logf("%d of %d runs (%s): explanations and docs/libraries.md not checked", len(runs), want, why)
		return
	}
	sort.Slice(runs, func(i, j int) bool {
		a, b := runs[i], runs[j]
		if a.scenario != b.scenario {
			return slices.Index(scenarioNames, a.scenario) < slices.Index(scenarioNames, b.scenario)
		}
		if a.subject != b.subject {
			return slices.Index(libraries, a.subject) < slices.Index(libraries, b.subject)
		}
		return a.seed < b.seed
	})
	for _, e := range checkExplanations(runs) {
		t.Error(e)
	}
	doc := markdown(runs, seeds)
	if *writeDoc != "" {
		// The gRPC section is TestGRPCLibraries's: kept as it is.
		if prev, err := os.ReadFile(*writeDoc); err == nil {
			if _, grpc, ok := strings.Cut(string(prev), grpcMarker); ok {
				doc = append(append(doc, "\n"+grpcMarker...), grpc...)
			}
		}
		if err := os.WriteFile(*writeDoc, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v; regenerate it with\n\t%s", err, regenerate)
	}
	head, _, _ := strings.Cut(string(old), "\n"+grpcMarker) // TestGRPCLibraries's
	if a, b := stableView(head), stableView(string(doc)); a != b {
		t.Errorf("%s is stale: %s\nregenerate it with\n\t%s", docPath, doccheck.FirstDiff(a, b), regenerate)
	}
}

// replayable reports whether a library draws its jitter only from the
// seeded source, so that its runs, and its part of the document, replay.
func replayable(name string) bool {
	s, err := subjects.Lookup(name)
	if err != nil {
		return false
	}
	d, ok := s.(subjects.Describer)
	return ok && d.Describe(subjects.Params{}).Replayable
}

// stableView is doc without what a regeneration redraws: the table rows
// and the evidence sections of libraries that are not replayable.
func stableView(doc string) string {
	var out []string
	skipping := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "### ") || strings.HasPrefix(line, "## ") {
			skipping = false
			if name, ok := strings.CutPrefix(line, "### "); ok {
				name, _, _ = strings.Cut(name, " ")
				skipping = slices.Contains(libraries, name) && !replayable(name)
			}
		}
		if skipping {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ := strings.Cut(rest, "`")
			if slices.Contains(libraries, name) && !replayable(name) {
				continue
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// checkExplanations returns an error for every explanation the runs do
// not bear out: a cause subject/check whose check failed for that subject
// on no scenario and seed, a cause subject/scenario/check whose check did
// not fail there, an outcome note subject/scenario whose seed-1 run has
// requests that ended ok. For libraries that are not replayable a failure
// seen on only some seeds may be missing from one run: their causes are
// required only when the document states the failure, which it then
// cannot, so a stale one still shows in the comparison's rows.
func checkExplanations(runs []run) []string {
	failed := func(subject, scenario, check string) bool {
		for _, r := range runs {
			if r.subject == subject && (scenario == "" || r.scenario == scenario) {
				if c := r.verdict.Check(check); c != nil && c.Status == analyzer.StatusFail {
					return true
				}
			}
		}
		return false
	}
	var errs []string
	for _, key := range slices.Sorted(maps.Keys(causes)) {
		parts := strings.Split(key, "/")
		subject, check, scenario := parts[0], parts[len(parts)-1], ""
		if len(parts) == 3 {
			scenario = parts[1]
		}
		if !failed(subject, scenario, check) && replayable(subject) {
			where := "any scenario"
			if scenario != "" {
				where = scenario
			}
			errs = append(errs, fmt.Sprintf("causes[%q] explains a %s failure of %s in %s, which no run (seeds %v) shows: "+
				"the bug was fixed or the check changed; update or remove the explanation", key, check, subject, where, seeds))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(outcomeNotes)) {
		subject, scenario, _ := strings.Cut(key, "/")
		for _, r := range runs {
			if r.subject == subject && r.scenario == scenario && r.seed == seeds[0] && r.results["ok"] > 0 {
				errs = append(errs, fmt.Sprintf("outcomeNotes[%q] explains why no request ended ok, but seed %d shows %s: "+
					"update or remove the note", key, r.seed, resultsText(r.results)))
			}
		}
	}
	return errs
}

func findFact(subject, scenario string) (fact, bool) {
	for _, f := range facts {
		if f.subject == subject && f.scenario == scenario {
			return f, true
		}
	}
	return fact{}, false
}

func checkFact(t *testing.T, f fact, r run) {
	t.Helper()
	v := r.verdict
	if got := v.Failed(); !slices.Equal(got, f.failed) {
		var b strings.Builder
		analyzer.WriteText(&b, v)
		t.Errorf("%s × %s: failed checks = %v; want %v\n%s", f.subject, f.scenario, got, f.failed, b.String())
	}
	if f.allResult != "" && (r.results[f.allResult] != r.requests || r.requests == 0) {
		t.Errorf("%s × %s: results = %v over %d requests; want every one %q", f.subject, f.scenario, r.results, r.requests, f.allResult)
	}
	if f.everyRetryEarly {
		c := v.Check(analyzer.CheckRetryAfter)
		if c == nil || c.Figure != float64(v.Figures.Retries) || v.Figures.Retries == 0 {
			t.Errorf("%s × %s: retry-after = %v early of %d retries; want every retry early", f.subject, f.scenario, c, v.Figures.Retries)
		}
	}
}

// describe returns the subject's module version and wiring summary as the
// run's meta record states them (subjects.Info, configured by the
// scenario's policy).
func describe(t *testing.T, name string, tl []byte) (version, summary string) {
	t.Helper()
	var rec timeline.Record
	if err := timeline.NewDecoder(bytes.NewReader(tl)).Decode(&rec); err != nil || rec.Meta == nil {
		t.Fatalf("%s: reading the timeline's meta record: %v", name, err)
	}
	return rec.Meta.SubjectVersion, rec.Meta.Summary
}

// figure is a check's figure against its threshold, as the verdict table
// prints it.
func figure(c *analyzer.CheckResult) string {
	f, th := num(c.Figure), num(c.Threshold)
	switch c.Unit {
	case "%", "% rate-limited":
		return strconv.FormatFloat(c.Figure, 'f', 1, 64) + "% > " + strconv.FormatFloat(c.Threshold, 'f', 1, 64) + "%"
	case "attempts/request":
		return strconv.FormatFloat(c.Figure, 'f', 2, 64) + " attempts/request > " + strconv.FormatFloat(c.Threshold, 'f', 2, 64)
	case "× full jitter":
		if c.Figure >= 1000 {
			f = "≥1000"
		} else {
			f = strconv.FormatFloat(c.Figure, 'f', 1, 64)
		}
		return f + "× > " + strconv.FormatFloat(c.Threshold, 'f', 1, 64) + "× (busiest-window index vs full jitter)"
	}
	return f + " " + c.Unit + " > " + th
}

func num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// cellKey indexes runs by library and scenario.
type cellKey struct{ subject, scenario string }

// markdown renders the findings: the verdict matrix, outcomes, the
// evidence and verified cause of each failure, and each library's wiring.
func markdown(runs []run, seeds []int64) []byte {
	cells := map[cellKey][]run{}
	meta := map[string]run{}
	for _, r := range runs {
		k := cellKey{r.subject, r.scenario}
		cells[k] = append(cells[k], r)
		meta[r.subject] = r
	}
	for _, rs := range cells {
		sort.Slice(rs, func(i, j int) bool { return rs[i].seed < rs[j].seed })
	}
	var b bytes.Buffer
	b.WriteString("# What retrylab finds in popular Go retry libraries\n\n")
	fmt.Fprintf(&b, "Each library runs at its retry defaults (wired by its `subjects` adapter as\n"+
		"listed under [wiring](#wiring)) through the built-in outage, malformed-Retry-After\n"+
		"and metastable scenarios (closed and open loop), in virtual time, seeds %s, and the analyzer judges each\n"+
		"timeline with the scenario's own `expect.checks` and the default thresholds.\n"+
		"`retrylab` (this project's `client` package) is the reference. Regenerate\n"+
		"with `make libraries`:\n\n    %s\n\n"+
		"`go test ./e2e/findings` (so `make check`) makes this document from the runs\n"+
		"and fails when the file differs. Each run redraws the jitter of the libraries\n"+
		"that use a global random source (backoff, resty, retry-go), so their figures\n"+
		"(and a check that fails on only some seeds) can differ from one run to the\n"+
		"next: their rows and sections are not compared; everything else must match.\n"+
		"Under -race the metastable runs (both) are skipped (too costly there); `make check`\n"+
		"runs this test once more without it (`make matrix`), which compares the file.\n\n"+
		"Metastable's clients need a per-attempt timeout shorter than the queueing\n"+
		"under overload, or they wait out any queue and never retry a slow response:\n"+
		"the scenario gives each library the application's 30 ms (`fleet.attempt_timeout`;\n"+
		"metastable-open 200 ms),\n"+
		"set where the library's documentation puts it — `http.Client.Timeout` on the\n"+
		"client each attempt goes through (retryablehttp's `HTTPClient`, resty's\n"+
		"`SetTimeout`, the user code's client around backoff, retry-go and go-retry),\n"+
		"and a failsafe-go timeout policy inside its retry policy. It is the\n"+
		"application's setting, not a retry default; no other scenario here sets one.\n\n", seedList(seeds), regenerate)
	b.WriteString("## How to read this\n\n" +
		"A cell is PASS when every selected check passed on every seed, otherwise FAIL\n" +
		"with the ids of the failed checks ([docs/checks.md](checks.md) defines each);\n" +
		"\"(k/n)\" marks a check that failed on only k of n seeds (backoff, resty and\n" +
		"retry-go draw jitter from a global random source, so their runs do not replay\n" +
		"exactly). Checks that need a stated policy judge each library against the\n" +
		"policy it states for itself (its attempt cap and budget), not the scenario's\n" +
		"policy for `retrylab`; a library with no attempt cap is held to the\n" +
		"amplification default of 5 attempts per request. \"hung\" means the call had\n" +
		"not returned when the scenario's watchdog (`fleet.timeout`) fired. A verdict\n" +
		"judges retry behaviour, not success: the outcomes table shows how many\n" +
		"logical requests ended `ok`. Under [evidence](#evidence), each failure has\n" +
		"the analyzer's figure against its threshold and its first example; where the\n" +
		"cause was checked in the library's source (the pinned version, in the module\n" +
		"cache), it is stated.\n\n")

	b.WriteString("## Verdicts\n\n")
	b.WriteString(matrix(cells, meta))

	b.WriteString("\n## Outcomes\n\nLogical requests by result, and attempts per logical request, seed " +
		strconv.FormatInt(seeds[0], 10) + ".\n\n| library |")
	for _, sc := range scenarioNames {
		b.WriteString(" " + sc + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(scenarioNames)) + "\n")
	for _, subj := range libraries {
		if _, ok := meta[subj]; !ok {
			continue
		}
		fmt.Fprintf(&b, "| `%s` |", subj)
		for _, sc := range scenarioNames {
			rs := cells[cellKey{subj, sc}]
			if len(rs) == 0 {
				b.WriteString(" — |")
				continue
			}
			r := rs[0]
			att := 0.0
			if r.verdict.Figures.Requests > 0 {
				att = float64(r.verdict.Figures.Attempts) / float64(r.verdict.Figures.Requests)
			}
			fmt.Fprintf(&b, " %s · %.2f att/req |", resultsText(r.results), att)
		}
		b.WriteString("\n")
	}

	b.WriteString(openLoop(cells, meta, seeds[0]))

	b.WriteString("\n## Evidence\n")
	for _, subj := range libraries {
		var lines []string
		for _, id := range analyzer.CheckIDs() {
			var sub []string
			for _, sc := range scenarioNames {
				rs := cells[cellKey{subj, sc}]
				var first *analyzer.CheckResult
				n := 0
				for _, r := range rs {
					if c := r.verdict.Check(id); c != nil && c.Status == analyzer.StatusFail {
						n++
						if first == nil {
							first = c
						}
					}
				}
				if first == nil {
					continue
				}
				line := fmt.Sprintf("  - %s (%d/%d seeds): %s", sc, n, len(rs), figure(first))
				if len(first.Examples) > 0 {
					line += "; e.g. " + exampleText(first.Examples[0])
				}
				if cause := causes[subj+"/"+sc+"/"+id]; cause != "" {
					line += " — *cause, verified:* " + cause
				}
				sub = append(sub, line)
			}
			if len(sub) == 0 {
				continue
			}
			head := "- `" + id + "`"
			if cause := causes[subj+"/"+id]; cause != "" {
				head += " — *cause, verified in the source:* " + cause
			}
			lines = append(lines, head, strings.Join(sub, "\n"))
		}
		for _, sc := range scenarioNames {
			rs := cells[cellKey{subj, sc}]
			if note := outcomeNotes[subj+"/"+sc]; note != "" && len(rs) > 0 && rs[0].results["ok"] == 0 {
				lines = append(lines, fmt.Sprintf("- no logical request ended `ok` in %s (seed %d: %s) — *cause, verified in the source:* %s",
					sc, rs[0].seed, resultsText(rs[0].results), note))
			}
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s %s\n\n%s\n", subj, meta[subj].version, strings.Join(lines, "\n"))
	}

	b.WriteString("\n## Wiring\n\n| library | module version | how it is wired (`subjects` adapter) |\n|---|---|---|\n")
	for _, subj := range libraries {
		r, ok := meta[subj]
		if !ok {
			continue
		}
		// The reference follows each scenario's policy; the libraries
		// their own defaults, the same in every scenario.
		var order []string
		byScenario := map[string][]string{}
		for _, sc := range scenarioNames {
			if rs := cells[cellKey{subj, sc}]; len(rs) > 0 {
				if byScenario[rs[0].summary] == nil {
					order = append(order, rs[0].summary)
				}
				byScenario[rs[0].summary] = append(byScenario[rs[0].summary], sc)
			}
		}
		var parts []string
		for _, sum := range order {
			parts = append(parts, strings.Join(byScenario[sum], ", ")+": "+sum)
		}
		wiring := r.summary
		if len(parts) > 1 {
			wiring = strings.Join(parts, "<br>")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", subj, r.version, mdCell(wiring))
	}
	b.WriteString("\nThe doc comment of each adapter in `subjects/` states the defaults in full.\n")

	b.WriteString("\n## Scenarios\n\n| scenario | what it does | checks |\n|---|---|---|\n")
	for _, sc := range scenarioNames {
		s, err := scenarios.Builtin(sc)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` |\n", sc, mdCell(s.Description), strings.Join(s.Expect.Checks, "`, `"))
	}
	return b.Bytes()
}

// matrix is the verdict table, one row per library (the README's table).
func matrix(cells map[cellKey][]run, meta map[string]run) string {
	var b strings.Builder
	b.WriteString("| library | version |")
	for _, sc := range scenarioNames {
		b.WriteString(" " + sc + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(scenarioNames)) + "\n")
	for _, subj := range libraries {
		r, ok := meta[subj]
		if !ok {
			continue
		}
		name := "`" + subj + "`"
		if subj == "retrylab" {
			name += " (reference)"
		}
		fmt.Fprintf(&b, "| %s | %s |", name, r.version)
		for _, sc := range scenarioNames {
			rs := cells[cellKey{subj, sc}]
			if len(rs) == 0 {
				b.WriteString(" — |")
				continue
			}
			ids := failedIDs(rs)
			if len(ids) == 0 {
				b.WriteString(" PASS |")
				continue
			}
			var parts []string
			for _, id := range ids {
				n := 0
				for _, r := range rs {
					if c := r.verdict.Check(id); c != nil && c.Status == analyzer.StatusFail {
						n++
					}
				}
				p := "`" + id + "`"
				if n < len(rs) {
					p += fmt.Sprintf(" (%d/%d)", n, len(rs))
				}
				parts = append(parts, p)
			}
			b.WriteString(" FAIL " + strings.Join(parts, ", ") + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// failedIDs are the checks that failed on any seed, in report order.
func failedIDs(rs []run) []string {
	var ids []string
	for _, id := range analyzer.CheckIDs() {
		for _, r := range rs {
			if c := r.verdict.Check(id); c != nil && c.Status == analyzer.StatusFail {
				ids = append(ids, id)
				break
			}
		}
	}
	return ids
}

func exampleText(e analyzer.Example) string {
	var parts []string
	if e.Client != "" {
		parts = append(parts, "client "+e.Client)
	}
	if e.Key != "" {
		parts = append(parts, "request "+e.Key)
	}
	parts = append(parts, e.Detail)
	return mdCell(strings.Join(parts, " · "))
}

// resultsText lists results by count, most first: "ok 600/600".
func resultsText(results map[string]int64) string {
	var total int64
	names := make([]string, 0, len(results))
	for k, n := range results {
		names = append(names, k)
		total += n
	}
	sort.Slice(names, func(i, j int) bool {
		if results[names[i]] != results[names[j]] {
			return results[names[i]] > results[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, results[k])
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" of %d", total)
}

func seedList(seeds []int64) string {
	s := make([]string, len(seeds))
	for i, v := range seeds {
		s[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(s, ", ")
}

// mdCell makes s safe inside a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

// openLoop is the table of the closed and open loop side by side: each
// library's load amplification, recovery and verdict in metastable and
// metastable-open, seed seed.
func openLoop(cells map[cellKey][]run, meta map[string]run, seed int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Closed loop and open loop\n\n"+
		"The same overload two ways, seed %d. `metastable` is a closed loop: 90 clients\n"+
		"each send their next request when the last call ends, so a client whose\n"+
		"calls are slow or retried sends fewer new ones. `metastable-open` is an open\n"+
		"loop: new requests arrive at 80 %% of the capacity whatever the server does,\n"+
		"one a client, the clients dealt to 4 processes that share one HTTP client\n"+
		"(one instance of the library; for `retrylab`, one retry budget per process).\n"+
		"Load amplification is attempts per first attempt from the trigger until\n"+
		"the recovery (threshold 1.5×, 8× in metastable); recovery is how long after\n"+
		"the trigger's end goodput is back at 90 %% of the offered load (threshold 5\n"+
		"s), \"never\" when it did not come back in the time observed.\n\n"+
		"| library | metastable: load amplification | recovery | verdict | metastable-open: load amplification | recovery | verdict |\n"+
		"|---|---:|---:|---|---:|---:|---|\n", seed)
	for _, subj := range libraries {
		if _, ok := meta[subj]; !ok {
			continue
		}
		fmt.Fprintf(&b, "| `%s` |", subj)
		for _, sc := range []string{"metastable", "metastable-open"} {
			var r *run
			for i, x := range cells[cellKey{subj, sc}] {
				if x.seed == seed {
					r = &cells[cellKey{subj, sc}][i]
				}
			}
			if r == nil {
				b.WriteString(" — | — | — |")
				continue
			}
			amp, rec := "—", "—"
			if c := r.verdict.Check(analyzer.CheckLoadAmplification); c != nil && c.Status != analyzer.StatusSkip {
				amp = strconv.FormatFloat(c.Figure, 'f', 2, 64) + "×"
			}
			if c := r.verdict.Check(analyzer.CheckRecovery); c != nil && c.Status != analyzer.StatusSkip {
				rec = strconv.FormatFloat(c.Figure, 'f', 2, 64) + " s"
				if c.Status == analyzer.StatusFail && strings.HasPrefix(c.Reason, "metastable") {
					rec = "never (" + strconv.FormatFloat(c.Figure, 'f', 1, 64) + " s seen)"
				}
			}
			verdict := strings.ToUpper(r.verdict.Status)
			if ids := r.verdict.Failed(); len(ids) > 0 {
				verdict += " `" + strings.Join(ids, "`, `") + "`"
			}
			fmt.Fprintf(&b, " %s | %s | %s |", amp, rec, verdict)
		}
		b.WriteString("\n")
	}
	return b.String()
}
