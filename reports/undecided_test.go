package reports

import (
	"testing"

	"github.com/retrylab/retrylab/analyzer"
)

// TestVerdictViewUndecided: a check the host's noise left undecided is
// counted apart from the skipped ones, and shows its range.
func TestVerdictViewUndecided(t *testing.T) {
	v := &analyzer.Verdict{Status: analyzer.VerdictInconclusive, Checks: []analyzer.CheckResult{
		{ID: analyzer.CheckWaves, Status: analyzer.StatusInconclusive, Figure: 74.6, Threshold: 10, Range: []float64{3, 74.6}},
		{ID: analyzer.CheckBudget, Status: analyzer.StatusSkip},
	}}
	vv := newVerdictView(v)
	if vv.Undecided != 1 || vv.Skipped != 1 {
		t.Errorf("undecided %d, skipped %d; want 1 and 1", vv.Undecided, vv.Skipped)
	}
	if got, want := vv.Checks[0].Figure, fmtNum(3)+"–"+fmtNum(74.6); got != want {
		t.Errorf("figure %q; want the range %q", got, want)
	}
}
