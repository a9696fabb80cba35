package validation_test

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/internal/doccheck"
	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
)

var validationDoc = flag.String("write-doc", "", "write the matrix's figures as Markdown to this file (docs/validation.md) instead of comparing them with it")

// docPath is the document the matrix is compared with, from this package.
const docPath = "../../docs/validation.md"

// regenerateValidation is the command that rewrites docs/validation.md
// (`make validation`).
const regenerateValidation = "go test ./e2e/validation -run TestValidationMatrix -count=1 -args -write-doc ../../docs/validation.md"

// checkGiveUp is the give-up check's id (requests lost to impatience).
const checkGiveUp = analyzer.CheckGiveUp

// seeds are the seeds every cell runs with.
var seeds = []int64{1, 2, 3}

// fleets trims the scenarios' fleets (clients, logical requests per
// client; 0: the scenario's) so the whole matrix stays well under two
// minutes under -race on two cores. Each keeps enough clients for its
// check to see a herd: waves judges fleets of 60, pacing the full 50 whose
// unpaced clients still overrun the 200/s quota many times over.
var fleets = map[string][2]int{
	"outage-delta":          {60, 0},
	"outage-date":           {60, 0},
	"outage-bare":           {60, 0},
	"quota-steady":          {0, 20},
	"quota-layered":         {0, 0},
	"quota-tiers":           {0, 0},
	"non-retryable":         {30, 10},
	"budget-trip":           {30, 0},
	"malformed-retry-after": {30, 0},
	"post-idempotency":      {30, 0},
	"flapping":              {60, 0},
	"slow-server":           {30, 0},
	// Not trimmed: its load (80 % of capacity) is the fleet's size.
	"metastable": {0, 0},
	// Not trimmed either: its load is the arrival rate, and its arrivals
	// must outlast the trigger by recovery's threshold and hold.
	"metastable-open": {0, 0},
}

// fleetOptions are the options that trim scenario's fleet.
func fleetOptions(scenario string) []retrylabtest.Option {
	var opts []retrylabtest.Option
	f := fleets[scenario]
	if f[0] > 0 {
		opts = append(opts, retrylabtest.WithClients(f[0]))
	}
	if f[1] > 0 {
		opts = append(opts, retrylabtest.WithRequests(f[1]))
	}
	return opts
}

// expected is the matrix's specification: for each subject, the scenarios
// in which it fails, and exactly which checks it fails there, on every
// seed. A cell not listed must fail nothing; the reference client fails
// nothing anywhere. A control's aimed checks are the union of its cells.
//
// Every control keeps the reference client's retry budget but
// no-retry-budget and unbounded, whose mistake is a missing bound: under
// metastable's sustained overload the budget bounds the others' retries
// as it bounds the reference's, so only those two fail the capacity
// checks there.
var expected = map[string]map[string][]string{
	"retrylab": nil,
	// A constant wait: the fleet retries in step (waves). Its attempt cap
	// is sized for that wait, so it outlasts a short outage as the
	// reference client does. malformed-retry-after's 12 s of 503s at one
	// retry every Base (100 ms) is more than the reference's retry budget
	// pays for (100 retries a simulated client): each client's first call
	// spends it within 10 s and is refused its next retry, and its later
	// calls, which meet the outage too, are refused theirs, so every
	// request is lost (give-up), the harm retrying that often does to the
	// caller.
	"fixed-delay": {
		"outage-bare":           {analyzer.CheckWaves},
		"flapping":              {analyzer.CheckWaves},
		"malformed-retry-after": {checkGiveUp},
	},
	// Its fleet retries in step (waves). Under metastable's overload the
	// retry budget bounds its storm as the reference's (the server
	// recovers, little work is wasted), but its waves meet a full queue
	// together: most of a wave is rejected, so each call spends more of
	// its attempts, about 12 for every first attempt during the trigger
	// where the reference's make 5 (load-amplification).
	"exp-no-jitter": {
		"outage-bare": {analyzer.CheckWaves},
		"flapping":    {analyzer.CheckWaves},
		"metastable":  {analyzer.CheckLoadAmplification},
	},
	"ignore-retry-after": {
		"outage-delta":     {analyzer.CheckRetryAfter},
		"outage-date":      {analyzer.CheckRetryAfter},
		"post-idempotency": {analyzer.CheckRetryAfter},
		"budget-trip":      {analyzer.CheckRetryAfter},
	},
	"retry-4xx": {
		"non-retryable": {analyzer.CheckNonRetryable},
	},
	// Its attempts (up to ~23 where the derived cap is 45) stay under the
	// scenarios' caps; its missing budget shows as hung requests. Under
	// metastable's overload, with no retry budget either, its calls run
	// until the fleet's 3 s timeout (hung), hundreds of attempts each:
	// every check it is judged by fails.
	"unbounded": {
		"budget-trip": {analyzer.CheckBudget},
		"metastable":  {analyzer.CheckAttempts, analyzer.CheckBudget, analyzer.CheckRecovery, analyzer.CheckLoadAmplification, analyzer.CheckWastedWork},
		// Open loop likewise: its calls retry until the 2 s watchdog, many
		// times the offered load (docs/validation.md, metastable-open).
		"metastable-open": {analyzer.CheckAttempts, analyzer.CheckBudget, analyzer.CheckRecovery, analyzer.CheckLoadAmplification, analyzer.CheckWastedWork},
	},
	// One attempt: every request that meets a 503 is lost although the
	// server recovers within the budget.
	"no-retry": {
		"outage-delta":          {checkGiveUp},
		"outage-date":           {checkGiveUp},
		"outage-bare":           {checkGiveUp},
		"flapping":              {checkGiveUp},
		"malformed-retry-after": {checkGiveUp},
		"post-idempotency":      {checkGiveUp},
		"slow-server":           {checkGiveUp},
	},
	// Retries at once where the server sets no usable pace: instant
	// retries, and attempts spent within milliseconds of an outage
	// (give-up). Where Retry-After paces it, it passes. Its zero waits are
	// not waves: they arrive with the failures that triggered them.
	"no-backoff": {
		"outage-bare":           {analyzer.CheckInstantRetry, checkGiveUp},
		"flapping":              {analyzer.CheckInstantRetry, checkGiveUp},
		"malformed-retry-after": {analyzer.CheckInstantRetry, checkGiveUp},
	},
	// The waves controls (issue 11).
	// Its late retries all wait Cap (waves); under metastable's overload
	// they come in lockstep as exp-no-jitter's do (load-amplification,
	// about 11 attempts a first attempt).
	"capped-lockstep": {
		"outage-bare": {analyzer.CheckWaves},
		"metastable":  {analyzer.CheckLoadAmplification},
	},
	"clock-aligned": {
		"outage-bare": {analyzer.CheckWaves},
		"flapping":    {analyzer.CheckWaves},
	},
	"discrete-delays": {
		"outage-bare": {analyzer.CheckWaves},
		"flapping":    {analyzer.CheckWaves},
	},
	// Its mistake is server-induced synchronization, a warning by design
	// (see warned), never a failed check.
	"retry-after-plus-constant": nil,
	"no-idempotency-key": {
		"post-idempotency": {analyzer.CheckIdempotency},
	},
	"no-pacing": {
		"quota-steady":  {analyzer.CheckPacing},
		"quota-layered": {analyzer.CheckPacing},
		"quota-tiers":   {analyzer.CheckPacing},
	},
	// Our client with its retry budget off (issue 15). Each call is still
	// bounded as the reference client's, and on the scenarios where the
	// server recovers its budget is never what stops a retry (a simulated
	// client's 500 tokens pay for 100 retries more than its successes give
	// back): it behaves as retrylab does. Its mistake shows only under
	// sustained overload, in metastable.
	//
	// In metastable-open, open-loop arrivals dealt to 4 processes that
	// share a client, its storm is the same (10× the offered load, no
	// recovery); every control that keeps the retry budget, shared there
	// by a process's calls, bounds its retries as the reference does and
	// recovers within about a second, whatever its backoff: exp-no-jitter
	// and fixed-delay pass there.
	"no-retry-budget": {
		"metastable":      capacityChecks,
		"metastable-open": capacityChecks,
	},
}

// capacityChecks are the checks a subject whose retries are not bounded
// across calls fails in metastable: the overload outlives the trigger
// (recovery), the attempts multiply the offered load (load-amplification)
// and most service goes to attempts whose client has gone (wasted-work).
// Only no-retry-budget fails them there: every other control keeps the
// reference's retry budget, which bounds the storm, and unbounded fails
// them among its own.
var capacityChecks = []string{analyzer.CheckRecovery, analyzer.CheckLoadAmplification, analyzer.CheckWastedWork}

// pending are expected cells in scenarios not built in yet, subject →
// scenario → checks: once the scenario is built in they are expected
// cells like the others; until then a control whose mistake only they
// expose is exempt from failing somewhere, and the document lists them.
var pending = map[string]map[string][]string{}

// mergePending moves the pending cells of the scenarios now built in into
// expected; it returns the controls still waiting for one.
func mergePending() map[string]bool {
	waiting := map[string]bool{}
	for s, cells := range pending {
		for sc, checks := range cells {
			if !slices.Contains(scenarios.BuiltinNamesOf("http"), sc) {
				waiting[s] = true
				continue
			}
			if expected[s] == nil {
				expected[s] = map[string][]string{}
			}
			expected[s][sc] = append(expected[s][sc], checks...)
			delete(cells, sc)
		}
	}
	return waiting
}

// mayFail are checks a cell may fail on some seeds and not others, beyond
// expected: subject → scenario → checks. None now: retry-after-plus-constant
// once retried every Base on a past-date Retry-After in
// malformed-retry-after and could lose a request there; built on the
// client, it reads a past date as the client does (an immediate retry
// allowed, so its backoff applies) and, with no positive Retry-After in
// that scenario, makes the reference's attempts, which lose none.
var mayFail = map[string]map[string][]string{}

// warned are controls whose mistake shows as a warning, not a failed
// check: subject → scenario → the warning every seed must raise.
var warned = map[string]map[string]string{
	"retry-after-plus-constant": {"outage-delta": analyzer.WarnServerSync, "outage-date": analyzer.WarnServerSync},
}

// mustFail are the cells the issue names: they must fail the check, and
// the check must be selected by the scenario (not dropped as unselected).
var mustFail = []struct{ subject, scenario, check string }{
	{"no-retry", "outage-delta", checkGiveUp},
	{"no-retry", "outage-date", checkGiveUp},
	{"no-retry", "outage-bare", checkGiveUp},
}

// want is what cell (scenario, subject) must fail: the expected checks
// the scenario selects, in report order.
func want(subject, scenario string, v *analyzer.Verdict) []string {
	var ids []string
	for _, id := range analyzer.CheckIDs() {
		if !slices.Contains(expected[subject][scenario], id) {
			continue
		}
		if c := v.Check(id); c != nil && !unselected(c) {
			ids = append(ids, id)
		}
	}
	return ids
}

func unselected(c *analyzer.CheckResult) bool {
	return c.Status == analyzer.StatusSkip && strings.HasPrefix(c.Reason, "not in the scenario")
}

// aimed is the union of a subject's expected checks, in report order.
func aimed(subject string) []string {
	var ids []string
	for _, id := range analyzer.CheckIDs() {
		for _, checks := range expected[subject] {
			if slices.Contains(checks, id) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

type cell struct {
	scenario, subject string
	seed              int64
	verdict           *analyzer.Verdict
	attempts          int64
	results           map[string]int64
	clients, requests int
}

// TestValidationMatrix plays every built-in scenario against retrylab and
// each negative control, seeds 1-3, in
// virtual time, with the fleets trimmed as fleets says, cells in
// parallel. For every cell it checks that the subject
// fails exactly the checks expected names for it there — nothing else,
// and the reference client nothing at all — that the verdict is never
// INCONCLUSIVE, and that every control fails somewhere. Then it renders
// the matrix and compares it with docs/validation.md; -write-doc FILE
// writes it instead:
//
//	go test ./e2e/validation -run TestValidationMatrix -count=1 -args -write-doc ../../docs/validation.md
func TestValidationMatrix(t *testing.T) {
	if testenv.RaceEnabled {
		// Every cell is a virtual-time run of code the race step covers
		// already: TestBuiltinsJudge plays every built-in, and
		// TestEverySubjectReplays every subject with 16 clients in 4
		// processes, under the race detector. The matrix's business is
		// the verdicts on every seed: `make matrix` runs it without it.
		t.Skip("the verdicts on every seed, without the race detector: make matrix runs it")
	}
	waiting := mergePending()
	controls := subjects.Controls()
	subjectNames := append([]string{"retrylab"}, controls...)
	for _, sc := range scenarios.BuiltinNamesOf("http") {
		if _, ok := fleets[sc]; !ok {
			t.Errorf("built-in scenario %q has no entry in fleets; add it", sc)
		}
	}
	for _, s := range subjectNames {
		if _, ok := expected[s]; !ok {
			t.Errorf("subject %q has no expected cells in this test; add it", s)
		}
	}
	for s, cells := range expected {
		if !slices.Contains(subjectNames, s) {
			t.Errorf("expected names %q, which is not a control", s)
		}
		for sc := range cells {
			if _, ok := fleets[sc]; !ok {
				t.Errorf("scenario %q has no entry in fleets", sc)
			}
			if !slices.Contains(scenarios.BuiltinNamesOf("http"), sc) {
				t.Errorf("expected[%q] names scenario %q, which is not built in", s, sc)
			}
		}
	}
	var mu sync.Mutex
	var cells []cell
	t.Run("cells", func(t *testing.T) {
		for _, sc := range scenarios.Builtins() {
			if sc.Server.Protocol == "grpc" {
				continue // judged with the gRPC subjects (subjects/grpcsubjects)
			}
			for _, subj := range subjectNames {
				for _, seed := range seeds {
					t.Run(fmt.Sprintf("%s/%s/seed%d", sc.Name, subj, seed), func(t *testing.T) {
						t.Parallel()
						res := retrylabtest.Run(t, retrylabtest.Builtin(sc.Name), retrylabtest.Registered(subj), append(fleetOptions(sc.Name), retrylabtest.WithSeed(seed))...)
						v := res.Verdict
						mu.Lock()
						cells = append(cells, cell{sc.Name, subj, seed, v, v.Figures.Attempts, v.Figures.Results,
							res.Summary.Clients, int(res.Summary.Planned) / max(1, res.Summary.Clients)})
						mu.Unlock()
						judgeCell(t, subj, sc.Name, v)
					})
				}
			}
		}
	})
	// Every control is exposed somewhere; the cells the issue names fail.
	for _, s := range controls {
		exposed := false
		for _, c := range cells {
			if c.subject == s && (len(want(s, c.scenario, c.verdict)) > 0 || warned[s][c.scenario] != "") {
				exposed = true
			}
		}
		if !exposed && len(cells) > 0 && !waiting[s] {
			t.Errorf("%s fails no check in any cell: a control the matrix never exposes", s)
		}
		if !exposed && waiting[s] {
			t.Logf("%s fails no check yet: the scenario that exposes it is not built in (pending)", s)
		}
	}
	for _, m := range mustFail {
		for _, c := range cells {
			if c.subject == m.subject && c.scenario == m.scenario {
				if r := c.verdict.Check(m.check); r == nil || r.Status != analyzer.StatusFail {
					t.Errorf("%s × %s seed %d: %s = %v; want fail (the scenario must select it)", m.subject, m.scenario, c.seed, m.check, r)
				}
			}
		}
	}
	if t.Failed() {
		return
	}
	want := len(scenarios.BuiltinNamesOf("http")) * len(subjectNames) * len(seeds)
	if len(cells) != want {
		t.Logf("%d of %d cells ran (a -run filter?): docs/validation.md not compared", len(cells), want)
		return
	}
	sortCells(cells)
	doc := validationMarkdown(cells, seeds)
	if *validationDoc != "" {
		if err := os.WriteFile(*validationDoc, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	compareDoc(t, docPath, doc, regenerateValidation)
}

// judgeCell checks one cell's verdict against expected.
func judgeCell(t *testing.T, subj, scenario string, v *analyzer.Verdict) {
	t.Helper()
	if v.Status == analyzer.VerdictInconclusive {
		t.Errorf("%s: verdict INCONCLUSIVE (%s); want a run the analyzer can vouch for", subj, strings.Join(v.Inconclusive, "; "))
	}
	if id := warned[subj][scenario]; id != "" && !slices.ContainsFunc(v.Warnings, func(w analyzer.Warning) bool { return w.ID == id }) {
		t.Errorf("%s: no %s warning; want it: this scenario shows its mistake", subj, id)
	}
	w := want(subj, scenario, v)
	got := v.Failed()
	if slices.Equal(got, w) {
		return
	}
	for _, id := range got {
		if !slices.Contains(w, id) && !slices.Contains(mayFail[subj][scenario], id) {
			c := v.Check(id)
			t.Errorf("%s fails %s (%s vs %s: %s), a check not expected of it in this scenario", subj, id,
				fmtFig(c.Figure), fmtFig(c.Threshold), c.Reason)
		}
	}
	for _, id := range w {
		if c := v.Check(id); c.Status != analyzer.StatusFail {
			t.Errorf("%s: %s = %s (%s vs %s: %s); want fail: this scenario exposes its mistake", subj, id, c.Status,
				fmtFig(c.Figure), fmtFig(c.Threshold), c.Reason)
		}
	}
}

// sortCells orders cells as the document lists them: scenarios in
// built-in order, retrylab then the controls sorted, seeds ascending.
func sortCells(cells []cell) {
	scIdx := map[string]int{}
	for i, n := range scenarios.BuiltinNamesOf("http") {
		scIdx[n] = i
	}
	subjIdx := map[string]int{"retrylab": -1}
	for i, n := range subjects.Controls() {
		subjIdx[n] = i
	}
	slices.SortFunc(cells, func(a, b cell) int {
		if d := scIdx[a.scenario] - scIdx[b.scenario]; d != 0 {
			return d
		}
		if d := subjIdx[a.subject] - subjIdx[b.subject]; d != 0 {
			return d
		}
		return int(a.seed - b.seed)
	})
}

// compareDoc fails t when the file at path differs from doc, naming the
// first differing line and the command that regenerates the file.
func compareDoc(t *testing.T, path string, doc []byte, regenerate string) {
	t.Helper()
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; regenerate it with\n\t%s", err, regenerate)
	}
	if bytes.Equal(old, doc) {
		return
	}
	t.Errorf("%s is stale: %s\nregenerate it with\n\t%s", path, doccheck.FirstDiff(string(old), string(doc)), regenerate)
}

func fmtFig(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f), "0"), ".")
}

// validationMarkdown renders the matrix: one table per scenario, a row per
// subject, a cell per seed listing the failed checks with their figures.
func validationMarkdown(cells []cell, seeds []int64) []byte {
	var b bytes.Buffer
	b.WriteString("# Validation matrix\n\n")
	b.WriteString("Every built-in scenario × the reference client (`retrylab`) and each negative\n" +
		"control × seeds " + fmt.Sprint(seeds) + ",\n" +
		"run in virtual time (`retrylabtest`), judged with each\n" +
		"scenario's `expect.checks` and default thresholds. Fleets are trimmed to keep\n" +
		"the matrix fast (each scenario's heading gives its clients × requests).\n" +
		"`go test ./e2e/validation` runs every cell (not under -race: the race\n" +
		"step plays every built-in and every subject in tests of their own;\n" +
		"`make check` runs the matrix in `make matrix`, without it) and asserts\n" +
		"that `retrylab` fails nothing, that each control fails exactly the checks listed\n" +
		"below for it in each scenario and nothing else, that no verdict is\n" +
		"INCONCLUSIVE, and that this file is what the runs show. Regenerate it with\n" +
		"`make validation`:\n\n    " + regenerateValidation + "\n\n")
	b.WriteString("| subject | its mistake | checks it must fail, where |\n|---|---|---|\n")
	for _, s := range append([]string{"retrylab"}, subjects.Controls()...) {
		mistake := "— (the reference client)"
		if sub, err := subjects.Lookup(s); err == nil && s != "retrylab" {
			if d, ok := sub.(subjects.Describer); ok {
				mistake = strings.TrimPrefix(d.Describe(subjects.Params{}).Summary, "negative control: ")
			}
		}
		var where []string
		for _, sc := range scenarios.BuiltinNamesOf("http") {
			if checks := expected[s][sc]; len(checks) > 0 {
				where = append(where, "`"+strings.Join(checks, "`, `")+"` in "+sc)
			}
		}
		for _, sc := range slices.Sorted(maps.Keys(pending[s])) {
			where = append(where, "`"+strings.Join(pending[s][sc], "`, `")+"` in "+sc+" (not built in yet)")
		}
		for _, sc := range scenarios.BuiltinNamesOf("http") {
			if id := warned[s][sc]; id != "" {
				where = append(where, "warning "+id+" in "+sc)
			}
			if checks := mayFail[s][sc]; len(checks) > 0 {
				where = append(where, "may fail `"+strings.Join(checks, "`, `")+"` in "+sc)
			}
		}
		cellText := "none, anywhere"
		if len(where) > 0 {
			cellText = strings.Join(where, "; ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s, mistake, cellText)
	}
	b.WriteString("\nA check a scenario does not select is not expected there.\n")
	byScenario := map[string][]cell{}
	var order []string
	for _, c := range cells {
		if _, ok := byScenario[c.scenario]; !ok {
			order = append(order, c.scenario)
		}
		byScenario[c.scenario] = append(byScenario[c.scenario], c)
	}
	total, fails, unexpected := 0, 0, 0
	for _, sc := range order {
		cs := byScenario[sc]
		fmt.Fprintf(&b, "\n## %s\n\nfleet: %d clients × %d requests; checks: `%s`\n\n", sc, cs[0].clients, cs[0].requests,
			strings.Join(selected(cs[0].verdict), "`, `"))
		b.WriteString("| subject |")
		for _, s := range seeds {
			fmt.Fprintf(&b, " seed %d |", s)
		}
		b.WriteString(" attempts (seed " + fmt.Sprint(seeds[0]) + ") | requests not ok (seed " + fmt.Sprint(seeds[0]) + ") |\n|---|")
		for range seeds {
			b.WriteString("---|")
		}
		b.WriteString("---:|---|\n")
		rows := map[string]map[int64]cell{}
		var subjOrder []string
		for _, c := range cs {
			if rows[c.subject] == nil {
				rows[c.subject] = map[int64]cell{}
				subjOrder = append(subjOrder, c.subject)
			}
			rows[c.subject][c.seed] = c
		}
		for _, s := range subjOrder {
			fmt.Fprintf(&b, "| `%s` |", s)
			for _, seed := range seeds {
				c, ok := rows[s][seed]
				if !ok {
					b.WriteString(" — |")
					continue
				}
				total++
				failed := c.verdict.Failed()
				if len(failed) == 0 {
					b.WriteString(" ✓ pass |")
					continue
				}
				fails++
				var parts []string
				for _, id := range failed {
					r := c.verdict.Check(id)
					mark := ""
					if !slices.Contains(expected[s][sc], id) && !slices.Contains(mayFail[s][sc], id) {
						mark = " ⚠ unexpected"
						unexpected++
					}
					parts = append(parts, fmt.Sprintf("✗ %s %s%s", id, figure(r), mark))
				}
				b.WriteString(" " + strings.Join(parts, "<br>") + " |")
			}
			c1 := rows[s][seeds[0]]
			fmt.Fprintf(&b, " %d | %s |\n", c1.attempts, notOK(c1.results))
		}
		// The figures behind the verdicts, first seed.
		ids := selected(cs[0].verdict)
		fmt.Fprintf(&b, "\nFigures, seed %d (threshold in the header; ✗ failed, — skipped):\n\n| subject |", seeds[0])
		for _, id := range ids {
			r := cs[0].verdict.Check(id)
			fmt.Fprintf(&b, " %s (≤ %s) |", id, unitFig(r.Threshold, r.Unit))
		}
		b.WriteString(" warnings |\n|---|")
		for range ids {
			b.WriteString("---:|")
		}
		b.WriteString("---|\n")
		for _, s := range subjOrder {
			c, ok := rows[s][seeds[0]]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| `%s` |", s)
			for _, id := range ids {
				r := c.verdict.Check(id)
				switch r.Status {
				case analyzer.StatusSkip:
					b.WriteString(" — |")
				case analyzer.StatusFail:
					fmt.Fprintf(&b, " ✗ %s |", unitFig(r.Figure, r.Unit))
				default:
					fmt.Fprintf(&b, " %s |", unitFig(r.Figure, r.Unit))
				}
			}
			var warns []string
			for _, w := range c.verdict.Warnings {
				warns = append(warns, w.ID)
			}
			fmt.Fprintf(&b, " %s |\n", strings.Join(warns, ", "))
		}
	}
	fmt.Fprintf(&b, "\n%d runs; %d verdicts failed; %d failures outside the expected (or allowed) checks.\n", total, fails, unexpected)
	return b.Bytes()
}

// notOK lists the results other than ok, most first ("gave-up 300"), or "—".
func notOK(results map[string]int64) string {
	var keys []string
	for k := range results {
		if k != "ok" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "—"
	}
	sort.Slice(keys, func(i, j int) bool {
		if results[keys[i]] != results[keys[j]] {
			return results[keys[i]] > results[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, results[k])
	}
	return strings.Join(parts, ", ")
}

func selected(v *analyzer.Verdict) []string {
	var ids []string
	for _, c := range v.Checks {
		if c.Status != analyzer.StatusSkip || !strings.HasPrefix(c.Reason, "not in the scenario") {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

func figure(c *analyzer.CheckResult) string {
	f := fmtFig(c.Figure)
	t := fmtFig(c.Threshold)
	switch c.Unit {
	case "%", "% rate-limited":
		return f + "% > " + t + "%"
	case "× full jitter":
		if c.Figure >= 1000 {
			f = "≥1000"
		}
		return f + "× > " + t + "×"
	}
	return f + " > " + t
}

func unitFig(f float64, unit string) string {
	switch unit {
	case "%", "% rate-limited":
		return fmtFig(f) + "%"
	case "× full jitter":
		if f >= 1000 {
			return "≥1000×"
		}
		return fmtFig(f) + "×"
	}
	return fmtFig(f)
}
