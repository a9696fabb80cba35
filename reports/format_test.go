package reports

import (
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// exponent finds a number printed in exponent form (1.2e+03).
var exponent = regexp.MustCompile(`[0-9]e[+-]?[0-9]`)

// TestFactsFormatting: the report's figures read as a reviewer wants
// them: durations to three significant digits, counts and shares by the
// one formatter of their kind, never in exponent form.
func TestFactsFormatting(t *testing.T) {
	s := Stats{
		Attempts: 12345, Requests: 1234, Retries: 11111, OK: 1234, Throttled: 11111,
		Amplification: 12345.0 / 1234, Outcomes: 1234, SuccessRate: 1,
		Results: map[string]int64{"ok": 1234}, P50: 1500 * time.Microsecond, P99: 112411491,
		End: 61234 * time.Millisecond, RetryAfterRetries: 11111, EarlyRetries: 1,
	}
	got := map[string]string{}
	for _, f := range statFacts(s) {
		got[f.Name] = f.Value
	}
	for name, want := range map[string]string{
		"attempts": "12,345", "logical requests": "1234", "retries": "11,111 (90.0%)",
		"amplification (attempts per logical request)": "10", "success rate": "100.0%",
		"completion p50": "1.5ms", "completion p99": "112ms", "timeline span": "1m1s",
		"of which early": "1 (<0.1%)",
	} {
		if got[name] != want {
			t.Errorf("fact %q = %q; want %q", name, got[name], want)
		}
	}
	for name, v := range got {
		if exponent.MatchString(v) {
			t.Errorf("fact %q = %q: a number in exponent form", name, v)
		}
	}
}

// TestCompareFormatting: the comparison table prints each key figure by
// its formatter: 1234 and 762 alike, a p99 to three significant digits.
func TestCompareFormatting(t *testing.T) {
	r := Ranked{Ranked: analyzer.Ranked{Subject: "s", Verdict: analyzer.VerdictPass, Pass: true,
		Figures: map[string]float64{FigureHerd: 762.4, FigureEarly: 1234, FigureAmplification: 1.23456, FigureSuccess: 97.24, FigureP99: 0.112411491},
		Status:  map[string]string{}}}
	cells := compareCells(r)
	var vs []string
	for _, c := range cells {
		vs = append(vs, c.Value)
	}
	if got, want := strings.Join(vs, " | "), "762 | 1234 | 1.23 | 97.2% | 112ms"; got != want {
		t.Errorf("cells = %q; want %q", got, want)
	}
	if c := compareCells(Ranked{Ranked: analyzer.Ranked{Figures: map[string]float64{FigureP99: math.NaN()}}}); c[len(c)-1].Value != "n/a" {
		t.Errorf("unknown p99 = %q; want n/a", c[len(c)-1].Value)
	}
}

// TestAttemptsStatesBinWidth: the attempts-per-second plot says over what
// width its bars average, exactly as the bars are wide, also when folding
// doubled a round width; a bar's height is its attempts over that width.
func TestAttemptsStatesBinWidth(t *testing.T) {
	s := int64(time.Second)
	for _, tt := range []struct {
		dur, last int64
		want      string
		peak      float64 // attempts per second of the first bin: 2 attempts
	}{
		{30 * s, 29 * s, "attempts per second (100ms bins)", 20},                       // 50ms bins, folded once
		{2 * s, 1999 * int64(time.Millisecond), "attempts per second (8ms bins)", 250}, // 2ms, folded twice
	} {
		c := collect(&timeline.Meta{Recorder: "run", Duration: tt.dur}, Options{},
			att("1", "a", 1, 0, ms, 200), att("2", "b", 1, ms, 2*ms, 200), att("3", "c", 1, tt.last, tt.last+ms, 200))
		p := plotOf(t, c.plotAttempts())
		if p.Y.Label.Text != tt.want {
			t.Errorf("duration %v: y axis %q; want %q", time.Duration(tt.dur), p.Y.Label.Text, tt.want)
		}
		if top := p.Y.Max / 1.15; math.Abs(top-tt.peak) > 1e-9 {
			t.Errorf("duration %v: highest bar %v attempts/s; want %v (2 attempts in one bin)", time.Duration(tt.dur), top, tt.peak)
		}
	}
}
