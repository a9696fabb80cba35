package timeline

import (
	"testing"
	"time"
)

func TestParseWaitClaim(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"125", 125 * time.Millisecond, true},
		{"12.5", 12500 * time.Microsecond, true},
		{"0.000001", time.Nanosecond, true},
		{"007", 7 * time.Millisecond, true},
		{"86400000", 24 * time.Hour, true},
		{"86400000.000001", 0, false}, // past a day
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1e3", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1.0000001", 0, false}, // finer than a nanosecond
		{" 1", 0, false},
		{"1 ", 0, false},
		{"NaN", 0, false},
		{"1000000000", 0, false}, // ten digits
	} {
		got, ok := ParseWaitClaim(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseWaitClaim(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
