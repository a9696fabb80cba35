package reports

import (
	"time"

	"github.com/retrylab/retrylab/analyzer"
)

// The report's formatters: one for each kind of figure in its text and on
// its plots (the axes' tick labels excepted: they take the decimals their
// step needs). They are the analyzer's, so a figure reads alike in the
// HTML, on the plots and in the comparison's Markdown.

// fmtNum prints a figure rounded to what matters: three significant digits
// but all its whole digits, never in exponent form, thousands grouped from
// five digits on; "n/a" when unknown (analyzer.FormatNumber).
func fmtNum(f float64) string { return analyzer.FormatNumber(f) }

// fmtCount prints a count as fmtNum does: 762, 1234, 12,345.
func fmtCount[T int | int64 | uint64](n T) string { return fmtNum(float64(n)) }

// fmtPct prints a percentage with one decimal, never 0.0% or 100.0% for one
// that is not (analyzer.FormatPercent).
func fmtPct(pct float64) string { return analyzer.FormatPercent(pct) }

// fmtShare prints a share in [0, 1] as fmtPct prints its percentage.
func fmtShare(x float64) string { return fmtPct(100 * x) }

// fmtOf prints n of a total: "12 (3.4%)", or the count alone when the total
// is 0.
func fmtOf[T int | int64 | uint64](n, of T) string {
	if of == 0 {
		return fmtCount(n)
	}
	return fmtCount(n) + " (" + fmtShare(float64(n)/float64(of)) + ")"
}

// fmtDur prints a duration to three significant digits in the unit that
// reads best: 112ms, 1.5ms, 2.5s, 1m30s (analyzer.FormatDuration).
func fmtDur(d time.Duration) string { return analyzer.FormatDuration(d) }
