package analyzer

import (
	"cmp"
	"math"
	"slices"
)

// The key figures subjects are compared on, in the order a comparison
// shows them.
const (
	FigureHerd          = "herd"          // the waves check's figure: bunching relative to full jitter
	FigureEarly         = "early"         // early retries (the retry-after check's figure)
	FigureAmplification = "amplification" // attempts per logical request
	FigureSuccess       = "success"       // share of logical requests that succeeded, %
	FigureP99           = "p99"           // p99 completion time of logical requests, s
)

// KeyFigure is one key figure of a comparison and the check that judges it.
type KeyFigure struct {
	ID    string
	Check string // the check that judges the figure ("": none, as for the success rate)
	// LowerBetter is true when a smaller figure is better.
	LowerBetter bool
}

// KeyFigures returns the key figures in comparison order.
func KeyFigures() []KeyFigure {
	return []KeyFigure{
		{FigureHerd, CheckWaves, true},
		{FigureEarly, CheckRetryAfter, true},
		{FigureAmplification, CheckAmplification, true},
		{FigureSuccess, "", false},
		{FigureP99, CheckBudget, true},
	}
}

// RankRun is one run of one subject on the compared scenario: its verdict
// and its key figures.
type RankRun struct {
	Subject string
	Seed    int64
	Verdict *Verdict
	// Figures holds the run's key figures by Figure* id; a missing or NaN
	// figure is unknown.
	Figures map[string]float64
}

// Ranked is one subject's line in a ranking, over its runs.
type Ranked struct {
	Rank    int // 1-based
	Subject string
	Runs    int
	Pass    bool // every run passed
	// Verdict is the subject's verdict over its runs: fail when any run
	// failed a check, else inconclusive when any run was inconclusive, else
	// pass (VerdictPass, VerdictFail, VerdictInconclusive).
	Verdict string
	Failed  []string // ids of the checks that failed in at least one run, in report order
	// Figures holds the key figures by Figure* id, averaged over the runs
	// that have them; NaN when none has.
	Figures map[string]float64
	// Status holds, by Figure* id, the status of the check that judges the
	// figure: fail when any run failed it, pass when at least one run
	// passed it and none failed, else skip. No check judges the success
	// rate: its status is always skip (the subject's verdict is Verdict).
	Status map[string]string
}

// Rank folds runs into one line per subject and orders the subjects best
// first: those whose every run passed, then those that failed (fewer
// failed checks first), then the inconclusive ones, which have no evidence
// and are never ranked as if they passed; among equals, higher success
// rate, lower amplification, lower p99 completion (unknown figures last),
// then name. It returns the ranking and the same lines (with their Rank)
// in the order the subjects first appear in runs. Every run needs a
// verdict.
func Rank(runs []RankRun) (ranking, subjects []Ranked) {
	subjects = foldRuns(runs)
	ranking = slices.Clone(subjects)
	slices.SortStableFunc(ranking, compareRanked)
	for i := range ranking {
		ranking[i].Rank = i + 1
		for j := range subjects {
			if subjects[j].Subject == ranking[i].Subject {
				subjects[j].Rank = i + 1
			}
		}
	}
	return ranking, subjects
}

// foldRuns makes one line per subject, in order of first appearance.
func foldRuns(runs []RankRun) []Ranked {
	var out []Ranked
	index := map[string]int{}
	sums := map[string]map[string][2]float64{} // subject → figure → (sum, n)
	failed := map[string]map[string]bool{}
	kfs := KeyFigures()
	for _, run := range runs {
		j, ok := index[run.Subject]
		if !ok {
			j = len(out)
			index[run.Subject] = j
			out = append(out, Ranked{Subject: run.Subject, Pass: true, Verdict: VerdictPass, Figures: map[string]float64{}, Status: map[string]string{}})
			sums[run.Subject] = map[string][2]float64{}
			failed[run.Subject] = map[string]bool{}
		}
		r := &out[j]
		r.Runs++
		v := run.Verdict
		if !v.Pass {
			r.Pass = false
		}
		switch {
		case v.Status == VerdictFail || (v.Status == "" && !v.Pass):
			r.Verdict = VerdictFail
		case v.Status == VerdictInconclusive && r.Verdict != VerdictFail:
			r.Verdict = VerdictInconclusive
		}
		for _, id := range v.Failed() {
			failed[run.Subject][id] = true
		}
		for _, kf := range kfs {
			if x, ok := run.Figures[kf.ID]; ok && !math.IsNaN(x) {
				s := sums[run.Subject][kf.ID]
				sums[run.Subject][kf.ID] = [2]float64{s[0] + x, s[1] + 1}
			}
			st := StatusSkip
			if ch := v.Check(kf.Check); kf.Check != "" && ch != nil {
				st = ch.Status
			}
			switch prev := r.Status[kf.ID]; {
			case prev == StatusFail || st == StatusFail:
				r.Status[kf.ID] = StatusFail
			case prev == StatusPass || st == StatusPass:
				r.Status[kf.ID] = StatusPass
			default:
				r.Status[kf.ID] = StatusSkip
			}
		}
	}
	for j := range out {
		r := &out[j]
		for _, kf := range kfs {
			s := sums[r.Subject][kf.ID]
			r.Figures[kf.ID] = math.NaN()
			if s[1] > 0 {
				r.Figures[kf.ID] = s[0] / s[1]
			}
		}
		for _, id := range CheckIDs() {
			if failed[r.Subject][id] {
				r.Failed = append(r.Failed, id)
			}
		}
	}
	return out
}

// verdictRank orders verdicts for the ranking: PASS first, then FAIL
// (ordered by its evidence below), then INCONCLUSIVE, which has none: a
// subject whose runs could not be judged is never ranked as if it passed.
func verdictRank(r Ranked) int {
	switch {
	case r.Pass:
		return 0
	case r.Verdict == VerdictInconclusive:
		return 2
	}
	return 1
}

// rankFigures are the key figures that order subjects of equal verdicts
// and failed checks, first first.
var rankFigures = [...]string{FigureSuccess, FigureAmplification, FigureP99}

// compareRanked orders subjects best first.
func compareRanked(a, b Ranked) int {
	if c := cmp.Compare(verdictRank(a), verdictRank(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(a.Failed), len(b.Failed)); c != 0 {
		return c
	}
	// NaN (unknown) sorts last in every figure.
	by := func(id string, lowerBetter bool) int {
		x, y := a.Figures[id], b.Figures[id]
		switch {
		case math.IsNaN(x) && math.IsNaN(y):
			return 0
		case math.IsNaN(x):
			return 1
		case math.IsNaN(y):
			return -1
		}
		if lowerBetter {
			return cmp.Compare(x, y)
		}
		return cmp.Compare(y, x)
	}
	for _, id := range rankFigures {
		for _, kf := range KeyFigures() {
			if kf.ID != id {
				continue
			}
			if c := by(id, kf.LowerBetter); c != 0 {
				return c
			}
		}
	}
	return cmp.Compare(a.Subject, b.Subject)
}
