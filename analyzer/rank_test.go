package analyzer

import (
	"math"
	"slices"
	"testing"
)

// rankVerdict is a verdict with the given status and checks (id: status).
func rankVerdict(status string, checks ...[2]string) *Verdict {
	v := &Verdict{Status: status, Pass: status == VerdictPass}
	for _, c := range checks {
		v.Checks = append(v.Checks, CheckResult{ID: c[0], Status: c[1]})
	}
	return v
}

func figs(success, amplification, p99 float64) map[string]float64 {
	return map[string]float64{FigureSuccess: success, FigureAmplification: amplification, FigureP99: p99}
}

func subjectsOf(rs []Ranked) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Subject)
	}
	return out
}

// TestRankOrder: PASS before FAIL before INCONCLUSIVE whatever the
// figures; among FAIL fewer failed checks first; then success, then
// amplification, then p99 (unknown last), then name.
func TestRankOrder(t *testing.T) {
	pass := func() *Verdict { return rankVerdict(VerdictPass, [2]string{CheckWaves, StatusPass}) }
	fail1 := func() *Verdict { return rankVerdict(VerdictFail, [2]string{CheckWaves, StatusFail}) }
	fail2 := func() *Verdict {
		return rankVerdict(VerdictFail, [2]string{CheckWaves, StatusFail}, [2]string{CheckBudget, StatusFail})
	}
	incon := func() *Verdict { return rankVerdict(VerdictInconclusive) }
	nan := math.NaN()
	runs := []RankRun{
		{"inconclusive-but-perfect", 1, incon(), figs(100, 1, 0.1)},
		{"fails-twice", 1, fail2(), figs(100, 1, 0.1)},
		{"fails-once", 1, fail1(), figs(10, 9, 9)},
		{"pass-low-success", 1, pass(), figs(50, 1, 1)},
		{"pass-b", 1, pass(), figs(90, 2, 1)},
		{"pass-a", 1, pass(), figs(90, 2, 1)},
		{"pass-less-amplified", 1, pass(), figs(90, 1.5, 5)},
		{"pass-p99-unknown", 1, pass(), figs(90, 2, nan)},
		{"pass-faster", 1, pass(), figs(90, 2, 0.5)},
	}
	ranking, subjects := Rank(runs)
	want := []string{"pass-less-amplified", "pass-faster", "pass-a", "pass-b", "pass-p99-unknown", "pass-low-success",
		"fails-once", "fails-twice", "inconclusive-but-perfect"}
	if got := subjectsOf(ranking); !slices.Equal(got, want) {
		t.Errorf("ranking %v;\nwant    %v", got, want)
	}
	for i, r := range ranking {
		if r.Rank != i+1 {
			t.Errorf("%s: rank %d at position %d", r.Subject, r.Rank, i+1)
		}
	}
	if got := subjectsOf(subjects); got[0] != "inconclusive-but-perfect" || got[len(got)-1] != "pass-faster" || subjects[0].Rank != len(runs) {
		t.Errorf("subjects %v (first ranked %d); want the runs' order with their ranks", got, subjects[0].Rank)
	}
}

// TestRankFolds: a subject's runs fold into one line: it passes only if
// every run does, fails if any fails (inconclusive only without a
// failure), its figures average the runs that have them, a figure's status
// is that of its check (fail wins, skip without one), and its failed
// checks are listed in report order.
func TestRankFolds(t *testing.T) {
	nan := math.NaN()
	runs := []RankRun{
		{"a", 1, rankVerdict(VerdictPass, [2]string{CheckWaves, StatusPass}, [2]string{CheckBudget, StatusSkip}), figs(100, 1, 2)},
		{"a", 2, rankVerdict(VerdictInconclusive, [2]string{CheckWaves, StatusSkip}), figs(80, 3, nan)},
		{"b", 1, rankVerdict(VerdictInconclusive), figs(100, 1, 1)},
		{"b", 2, rankVerdict(VerdictFail, [2]string{CheckBudget, StatusFail}, [2]string{CheckRetryAfter, StatusFail}), figs(100, 1, 1)},
		{"b", 3, rankVerdict(VerdictPass, [2]string{CheckBudget, StatusPass}), map[string]float64{}},
	}
	_, subjects := Rank(runs)
	a, b := subjects[0], subjects[1]
	if a.Runs != 2 || a.Pass || a.Verdict != VerdictInconclusive || len(a.Failed) != 0 {
		t.Errorf("a: %d runs, pass %v, verdict %s, failed %v; want 2, false, inconclusive, none", a.Runs, a.Pass, a.Verdict, a.Failed)
	}
	if a.Figures[FigureSuccess] != 90 || a.Figures[FigureAmplification] != 2 || a.Figures[FigureP99] != 2 || !math.IsNaN(a.Figures[FigureHerd]) {
		t.Errorf("a's figures %v; want success 90, amplification 2, p99 2 (one run), herd unknown", a.Figures)
	}
	if a.Status[FigureHerd] != StatusPass || a.Status[FigureP99] != StatusSkip || a.Status[FigureSuccess] != StatusSkip {
		t.Errorf("a's statuses %v; want herd pass, p99 skip, success skip", a.Status)
	}
	if b.Runs != 3 || b.Pass || b.Verdict != VerdictFail || !slices.Equal(b.Failed, []string{CheckRetryAfter, CheckBudget}) {
		t.Errorf("b: %d runs, pass %v, verdict %s, failed %v; want 3, false, fail, [retry-after budget]", b.Runs, b.Pass, b.Verdict, b.Failed)
	}
	if b.Status[FigureP99] != StatusFail || b.Status[FigureEarly] != StatusFail || b.Figures[FigureSuccess] != 100 {
		t.Errorf("b's statuses %v, figures %v; want p99 and early fail, success 100", b.Status, b.Figures)
	}
	if b.Rank != 1 || a.Rank != 2 {
		t.Errorf("ranks a %d, b %d; want the failing b first: FAIL ranks before INCONCLUSIVE", a.Rank, b.Rank)
	}
}

// TestKeyFigures: every key figure but the success rate is judged by a
// check that exists.
func TestKeyFigures(t *testing.T) {
	for _, kf := range KeyFigures() {
		if kf.ID == FigureSuccess {
			if kf.Check != "" || kf.LowerBetter {
				t.Errorf("success: check %q, lower better %v; want none, false", kf.Check, kf.LowerBetter)
			}
			continue
		}
		if !slices.Contains(CheckIDs(), kf.Check) || !kf.LowerBetter {
			t.Errorf("%s: check %q, lower better %v", kf.ID, kf.Check, kf.LowerBetter)
		}
	}
}
