package reports

import (
	"math"
	"strconv"
	"time"
)

// The report's formatters: one for each kind of figure in its text and
// on its plots.

// fmtShare prints a share in [0, 1] as a percentage: whole percents, or
// one decimal under 10 %, and never "0%" or "100%" for a share that is not.
func fmtShare(x float64) string {
	pct := 100 * x
	switch {
	case pct > 0 && pct < 0.1:
		return "<0.1%"
	case pct < 10:
		return strconv.FormatFloat(pct, 'f', 1, 64) + "%"
	case pct > 99 && pct < 100:
		return strconv.FormatFloat(math.Min(pct, 99.9), 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(math.Round(pct), 'f', 0, 64) + "%"
}

// fmtDur prints a duration compactly: 100ms, 2.5s, 1m30s.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%time.Second == 0 || d >= time.Minute:
		return d.Round(time.Millisecond).String()
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	}
	return d.String()
}
