package analyzer

import (
	"bytes"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		x    float64
		want string
	}{
		{0, "0"}, {3, "3"}, {-2, "-2"}, {0.5, "0.5"}, {1.2, "1.2"}, {2.34567, "2.35"},
		{0.0012345, "0.00123"}, {9.996, "10"}, {99.96, "100"}, {762.4, "762"},
		{1234, "1234"}, {1234.6, "1235"}, {12345, "12,345"}, {1234567.8, "1,234,568"},
		{-12345, "-12,345"}, {-0.0001, "-0.0001"}, {1e20, "100,000,000,000,000,000,000"},
		{math.NaN(), "n/a"}, {math.Inf(1), "∞"}, {math.Inf(-1), "-∞"},
	}
	for _, tt := range tests {
		if got := FormatNumber(tt.x); got != tt.want {
			t.Errorf("FormatNumber(%v) = %q; want %q", tt.x, got, tt.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0"}, {999, "999ns"}, {1234, "1.23µs"}, {250 * time.Microsecond, "250µs"},
		{1500 * time.Microsecond, "1.5ms"}, {100 * time.Millisecond, "100ms"},
		{112411491, "112ms"}, {999_600 * time.Microsecond, "1s"}, {2 * time.Second, "2s"},
		{2500 * time.Millisecond, "2.5s"}, {1234567891, "1.23s"}, {12345 * time.Millisecond, "12.3s"},
		{59_400 * time.Millisecond, "59.4s"}, {59_700 * time.Millisecond, "1m0s"},
		{90 * time.Second, "1m30s"}, {90_400 * time.Millisecond, "1m30s"}, {-112411491, "-112ms"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.d); got != tt.want {
			t.Errorf("FormatDuration(%d) = %q; want %q", int64(tt.d), got, tt.want)
		}
	}
}

func TestFormatPercent(t *testing.T) {
	tests := []struct {
		pct  float64
		want string
	}{
		{0, "0.0%"}, {0.01, "<0.1%"}, {0.06, "0.1%"}, {97.24, "97.2%"}, {99.94, "99.9%"},
		{99.96, ">99.9%"}, {100, "100.0%"}, {math.NaN(), "n/a"},
	}
	for _, tt := range tests {
		if got := FormatPercent(tt.pct); got != tt.want {
			t.Errorf("FormatPercent(%v) = %q; want %q", tt.pct, got, tt.want)
		}
	}
}

// TestRankingMarkdownNumbers: the comparison's Markdown prints every figure
// by the one formatter of its kind: no exponent form next to a plain
// number, a p99 rounded to what matters.
func TestRankingMarkdownNumbers(t *testing.T) {
	v := rankVerdict(VerdictPass, [2]string{CheckWaves, StatusPass})
	runs := []RankRun{{"s", 1, v, map[string]float64{
		FigureHerd: 762.4, FigureEarly: 1234, FigureAmplification: 12345.6, FigureSuccess: 99.96, FigureP99: 0.112411491,
	}}}
	ranking, _ := Rank(runs)
	var buf bytes.Buffer
	if err := WriteRankingMarkdown(&buf, "outage", ranking, runs); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	if want := "| 762 | 1234 | 12,346 | >99.9% | 112ms |"; !strings.Contains(md, want) {
		t.Errorf("Markdown lacks %q:\n%s", want, md)
	}
	if regexp.MustCompile(`[0-9]e[+-]?[0-9]`).MatchString(md) {
		t.Errorf("Markdown has a number in exponent form:\n%s", md)
	}
}
