package validation_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/subjects"
)

var (
	validationFull = flag.Bool("validation", false, "run the full validation matrix (every built-in scenario × retrylab and each negative control × 3 seeds)")
	validationDoc  = flag.String("write-doc", "", "with the matrix run, write its figures as Markdown to this file (docs/validation.md)")
)

// aimed is, for each subject of the matrix, the checks its mistake is
// aimed at: the only checks it may fail. The reference client may fail none.
var aimed = map[string][]string{
	"retrylab":           nil,
	"fixed-delay":        {analyzer.CheckWaves, analyzer.CheckJitterBounds},
	"exp-no-jitter":      {analyzer.CheckWaves},
	"ignore-retry-after": {analyzer.CheckRetryAfter},
	"retry-4xx":          {analyzer.CheckNonRetryable},
	"unbounded":          {analyzer.CheckAttempts, analyzer.CheckBudget, analyzer.CheckAmplification},
	"no-retry":           nil,
}

// exposes is where each mistake must show: subject → scenario → checks that
// must fail there, on every seed.
var exposes = map[string]map[string][]string{
	"fixed-delay":        {"outage-bare": {analyzer.CheckWaves}, "flapping": {analyzer.CheckWaves}},
	"exp-no-jitter":      {"outage-bare": {analyzer.CheckWaves}},
	"ignore-retry-after": {"outage-date": {analyzer.CheckRetryAfter}, "outage-delta": {analyzer.CheckRetryAfter}},
	"retry-4xx":          {"non-retryable": {analyzer.CheckNonRetryable}},
	"unbounded":          {"budget-trip": {analyzer.CheckBudget}},
}

type cell struct {
	scenario, subject string
	seed              int64
	verdict           *analyzer.Verdict
	attempts          int64
	elapsed           time.Duration
}

// TestValidationMatrix plays every built-in scenario against retrylab and
// each negative control in virtual time and checks that retrylab passes
// everything, that each control fails only the checks aimed at its mistake,
// and that each mistake shows where its scenario is meant to expose it.
//
// By default it runs the exposing pairs and retrylab on one seed with
// smaller fleets, to keep the suite fast. The full matrix (3 seeds, the
// scenarios' own fleets) runs with -validation, and -write-doc FILE writes
// its figures:
//
//	go test ./analyzer/validation -run TestValidationMatrix -count=1 -timeout 30m -args -validation -write-doc ../../docs/validation.md
func TestValidationMatrix(t *testing.T) {
	full := *validationFull || *validationDoc != ""
	if testing.Short() && !full {
		t.Skip("-short")
	}
	controls := subjects.Controls()
	subjectNames := append([]string{"retrylab"}, controls...)
	for _, s := range subjectNames {
		if _, ok := aimed[s]; !ok {
			t.Errorf("subject %q has no aimed checks in this test; add it", s)
		}
	}
	seeds := []int64{1, 2, 3}
	var opts []retrylabtest.Option
	if !full {
		seeds = seeds[:1]
		opts = append(opts, retrylabtest.WithClients(40))
	}
	var mu sync.Mutex
	var cells []cell
	for _, sc := range scenarios.Builtins() {
		for _, subj := range subjectNames {
			if !full && subj != "retrylab" && exposes[subj][sc.Name] == nil {
				continue
			}
			for _, seed := range seeds {
				name := fmt.Sprintf("%s/%s/seed%d", sc.Name, subj, seed)
				t.Run(name, func(t *testing.T) {
					start := time.Now()
					res := retrylabtest.Run(t, sc.Name, subj, append(opts, retrylabtest.WithSeed(seed))...)
					v := res.Verdict
					mu.Lock()
					cells = append(cells, cell{sc.Name, subj, seed, v, v.Figures.Attempts, time.Since(start)})
					mu.Unlock()
					for _, id := range v.Failed() {
						if !slices.Contains(aimed[subj], id) {
							c := v.Check(id)
							t.Errorf("%s fails %s (%s > %s: %s), a check not aimed at its mistake", subj, id,
								fmtFig(c.Figure), fmtFig(c.Threshold), c.Reason)
						}
					}
					for _, id := range exposes[subj][sc.Name] {
						if c := v.Check(id); c.Status != analyzer.StatusFail {
							t.Errorf("%s: %s = %s (%s vs %s: %s); want fail: this scenario exposes its mistake", subj, id, c.Status,
								fmtFig(c.Figure), fmtFig(c.Threshold), c.Reason)
						}
					}
				})
			}
		}
	}
	if *validationDoc != "" {
		doc := append(validationMarkdown(cells, seeds), librariesMarkdown(t)...)
		if err := os.WriteFile(*validationDoc, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
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
		"control × seeds " + fmt.Sprint(seeds) + ", run in virtual time (`retrylabtest`) and judged with the\n" +
		"scenario's `expect.checks` and default thresholds. Written by\n\n" +
		"    go test ./analyzer/validation -run TestValidationMatrix -count=1 -timeout 30m -args -validation -write-doc ../../docs/validation.md\n\n" +
		"(`make validation`). The test asserts that `retrylab` passes everything, that\n" +
		"each control fails only the checks aimed at its mistake, and that each\n" +
		"mistake shows in the scenario built to expose it.\n\n")
	b.WriteString("| control | its mistake | checks aimed at it |\n|---|---|---|\n")
	names := make([]string, 0, len(aimed))
	for s := range aimed {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		mistake := "— (the reference client)"
		if sub, err := subjects.Lookup(s); err == nil {
			if d, ok := sub.(subjects.Describer); ok {
				mistake = strings.TrimPrefix(d.Describe(subjects.Params{}).Summary, "negative control: ")
			}
		}
		if s == "retrylab" {
			mistake = "— (the reference client)"
		}
		checks := "none"
		if len(aimed[s]) > 0 {
			checks = "`" + strings.Join(aimed[s], "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s, mistake, checks)
	}
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
		fmt.Fprintf(&b, "\n## %s\n\nchecks: `%s`\n\n", sc, strings.Join(selected(cs[0].verdict), "`, `"))
		b.WriteString("| subject |")
		for _, s := range seeds {
			fmt.Fprintf(&b, " seed %d |", s)
		}
		b.WriteString(" attempts (seed " + fmt.Sprint(seeds[0]) + ") |\n|---|")
		for range seeds {
			b.WriteString("---|")
		}
		b.WriteString("---:|\n")
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
					if !slices.Contains(aimed[s], id) {
						mark = " ⚠ unexpected"
						unexpected++
					}
					parts = append(parts, fmt.Sprintf("✗ %s %s%s", id, figure(r), mark))
				}
				b.WriteString(" " + strings.Join(parts, "<br>") + " |")
			}
			fmt.Fprintf(&b, " %d |\n", rows[s][seeds[0]].attempts)
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
	fmt.Fprintf(&b, "\n%d runs; %d verdicts failed; %d failures outside the aimed checks.\n", total, fails, unexpected)
	return b.Bytes()
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
	case "%", "% 429":
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
	case "%", "% 429":
		return fmtFig(f) + "%"
	case "× full jitter":
		if f >= 1000 {
			return "≥1000×"
		}
		return fmtFig(f) + "×"
	}
	return fmtFig(f)
}
