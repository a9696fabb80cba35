package analyzer

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The formatters of figures in text a reviewer reads (the comparison's
// Markdown here, the reports' HTML and plots): one for each kind, so a
// number reads alike wherever it appears.

// FormatNumber prints a figure rounded to what matters: three significant
// digits, but never fewer than its whole digits (1234.6 → "1235", 2.34567
// → "2.35", 0.5 → "0.5"); never in exponent form; thousands grouped by
// commas from five digits on ("12,345", "1234"); "n/a" for NaN.
func FormatNumber(x float64) string {
	switch {
	case math.IsNaN(x):
		return "n/a"
	case math.IsInf(x, 1):
		return "∞"
	case math.IsInf(x, -1):
		return "-∞"
	}
	dec := 0
	if a := math.Abs(x); a > 0 && a < 100 {
		dec = 2 - int(math.Floor(math.Log10(a)))
	}
	s := strconv.FormatFloat(math.Abs(x), 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if strings.Trim(s, "0.") == "" {
		return "0"
	}
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if x < 0 {
		b.WriteByte('-')
	}
	for i := range len(intPart) {
		if i > 0 && len(intPart) >= 5 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(intPart[i])
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}

// FormatDuration prints a duration rounded to three significant digits in
// the unit that reads best: "112ms" (not "112.411491ms"), "1.5ms", "2.5s",
// "12.3s", "250µs"; a minute or more to the second ("1m30s"); 0 as "0".
func FormatDuration(d time.Duration) string {
	if d < 0 {
		return "-" + FormatDuration(-d)
	}
	if d >= time.Minute-500*time.Millisecond {
		return d.Round(time.Second).String()
	}
	// Three significant digits: round to the place of the third digit.
	p := time.Duration(1)
	for q := d; q >= 1000; q /= 10 {
		p *= 10
	}
	d = d.Round(p)
	unit, name := time.Duration(1), "ns"
	switch {
	case d == 0:
		return "0"
	case d >= time.Second:
		unit, name = time.Second, "s"
	case d >= time.Millisecond:
		unit, name = time.Millisecond, "ms"
	case d >= time.Microsecond:
		unit, name = time.Microsecond, "µs"
	}
	return strconv.FormatFloat(float64(d)/float64(unit), 'f', -1, 64) + name
}

// FormatPercent prints a percentage with one decimal ("97.2%"), never
// "0.0%" or "100.0%" for one that is not ("<0.1%", ">99.9%"); "n/a" for
// NaN.
func FormatPercent(p float64) string {
	switch {
	case math.IsNaN(p):
		return "n/a"
	case p > 0 && p < 0.05:
		return "<0.1%"
	case p >= 99.95 && p < 100:
		return ">99.9%"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// attemptsText is "3 attempts", "1 attempt", or "attempts unknown".
func attemptsText(n int) string {
	switch n {
	case 0:
		return "attempts unknown"
	case 1:
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

func fmtNS(ns int64) string { return fmtDur(ns) }

// fmtDur renders a duration compactly with millisecond precision above a
// second ("1.204s", "3ms", "250µs").
func fmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < 0:
		return "-" + fmtDur(-ns)
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
	case d >= time.Millisecond:
		return strings.TrimSuffix(strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64), ".0") + "ms"
	default:
		return d.String()
	}
}

// keepEarliest keeps the max earliest examples (by instant, then key)
// whatever order they come in, so the evidence does not depend on the
// order requests were closed in; detail is made only for one kept.
func keepEarliest(ex []Example, max int, e Example, detail func() string) []Example {
	before := func(x, y *Example) bool { return x.At < y.At || (x.At == y.At && x.Key < y.Key) }
	if len(ex) < max {
		e.Detail = detail()
		ex = append(ex, e)
	} else {
		last := -1
		for i := range ex {
			if last < 0 || before(&ex[last], &ex[i]) {
				last = i
			}
		}
		if last < 0 || !before(&e, &ex[last]) {
			return ex
		}
		e.Detail = detail()
		ex[last] = e
	}
	slices.SortFunc(ex, func(x, y Example) int {
		switch {
		case before(&x, &y):
			return -1
		case before(&y, &x):
			return 1
		}
		return 0
	})
	return ex
}
