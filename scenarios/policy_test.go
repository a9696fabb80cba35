package scenarios

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/retrylab/retrylab/subjects"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in   string
		want subjects.Policy
	}{
		{"max_attempts=8,budget=6s,base=200ms,cap=4s,jitter=full",
			subjects.Policy{MaxAttempts: 8, Budget: 6 * time.Second, Base: 200 * time.Millisecond, Cap: 4 * time.Second, Jitter: "full"}},
		{" max_attempts = 3 , jitter=decorrelated ", subjects.Policy{MaxAttempts: 3, Jitter: "decorrelated"}},
		{"rate=10/s,burst=5,timeout=2s", subjects.Policy{Rate: 10, Burst: 5, Timeout: 2 * time.Second}},
		{"rate=120/1m", subjects.Policy{Rate: 2}},
		{"budget=0", subjects.Policy{}},
		{"base=1s,cap=1s", subjects.Policy{Base: time.Second, Cap: time.Second}},
	}
	for _, tt := range tests {
		got, err := ParsePolicy(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParsePolicy(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

// TestParsePolicyErrors: every error names the bad item (its number and
// text) and says what is wrong with it, the first problem only.
func TestParsePolicyErrors(t *testing.T) {
	tests := []struct {
		in   string
		item int
		want string
	}{
		{"", 0, "empty: want KEY=VALUE"},
		{"  ", 0, "empty"},
		{"max_attempts=8,budget=6x", 2, `item 2 "budget=6x": budget: bad duration "6x"`},
		{"budget=6", 1, `budget: duration "6" has no unit`},
		{"max_attempts=8,,base=1s", 2, "empty item"},
		{"max_attempts=8,", 2, "empty item"},
		{"attempts=8", 1, `unknown key "attempts" (want one of base, cap, max_attempts, budget, jitter, rate, burst, timeout)`},
		{"max_attempts", 1, "want KEY=VALUE"},
		{"max_attempts=", 1, "max_attempts has no value"},
		{"max_attempts=eight", 1, `max_attempts: want an integer, got "eight"`},
		{"max_attempts=2.5", 1, `max_attempts: want an integer, got "2.5"`},
		{"max_attempts=-1", 1, "max_attempts: -1 is out of range [0, 1000000]"},
		{"jitter=fulll", 1, `jitter: want one of full, equal, decorrelated, got "fulll"`},
		{"base=-1s", 1, `base: negative duration "-1s"`},
		{"rate=fast", 1, `rate: bad rate "fast"`},
		{"base=1s,base=2s", 2, "base is given twice (first in item 1)"},
		{"base=2s,cap=1s,max_attempts=3", 2, `item 2 "cap=1s": cap 1s is below base 2s`},
		{strings.Repeat("a", MaxPolicyText+1), 0, "longer than"},
	}
	for _, tt := range tests {
		_, err := ParsePolicy(tt.in)
		var pe *PolicyError
		if !errors.As(err, &pe) || pe.Item != tt.item || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePolicy(%q) = %v; want item %d, %q", tt.in, err, tt.item, tt.want)
		}
	}
}

// TestFormatPolicyRoundTrips: what FormatPolicy writes, ParsePolicy reads
// back to the same policy, and a scenario's policy reads as it does.
func TestFormatPolicyRoundTrips(t *testing.T) {
	p := subjects.Policy{Base: 200 * time.Millisecond, Cap: 4 * time.Second, MaxAttempts: 8, Budget: 6 * time.Second,
		Jitter: "equal", Rate: 2.5, Burst: 3, Timeout: time.Second}
	s := FormatPolicy(p)
	if s != "base=200ms,cap=4s,max_attempts=8,budget=6s,jitter=equal,rate=2.5/s,burst=3,timeout=1s" {
		t.Errorf("FormatPolicy = %q", s)
	}
	back, err := ParsePolicy(s)
	if err != nil || back != p {
		t.Errorf("ParsePolicy(FormatPolicy(p)) = %+v, %v; want %+v", back, err, p)
	}
	sc := mustParse(t, "subject: {policy: {base: 200ms, cap: 4s, max_attempts: 8, budget: 6s, jitter: equal, rate: 2.5/s, burst: 3, timeout: 1s}}\n")
	if sc.Subject.Policy != p {
		t.Errorf("the scenario's policy = %+v; want %+v, as --policy reads it", sc.Subject.Policy, p)
	}
	if FormatPolicy(subjects.Policy{}) != "" {
		t.Errorf("FormatPolicy(zero) = %q; want empty", FormatPolicy(subjects.Policy{}))
	}
}

// FuzzParsePolicy: any text is either a policy that validates and writes
// back to itself, or a *PolicyError naming an item that exists, in valid
// UTF-8 when the input is.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"max_attempts=8,budget=6s,base=200ms,cap=4s,jitter=full", "rate=10/s", "base=2s,cap=1s",
		"a=b=c", ",", "max_attempts=0x10", "budget=1e3s", "jitter=\"full\"", "timeout= 1s ", "base=1s,base=1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePolicy(s)
		if err != nil {
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("ParsePolicy(%q) = %v; want a *PolicyError", s, err)
			}
			if pe.Item < 0 || pe.Item > strings.Count(s, ",")+1 {
				t.Fatalf("ParsePolicy(%q): item %d of %d", s, pe.Item, strings.Count(s, ",")+1)
			}
			if utf8.ValidString(s) && !utf8.ValidString(err.Error()) {
				t.Fatalf("ParsePolicy(%q): error %q is not UTF-8", s, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParsePolicy(%q) = %+v, which does not validate: %v", s, p, err)
		}
		if f := FormatPolicy(p); f != "" {
			back, err := ParsePolicy(f)
			if err != nil || back != p {
				t.Fatalf("ParsePolicy(%q) = %+v; written %q reads back %+v, %v", s, p, f, back, err)
			}
		}
	})
}
