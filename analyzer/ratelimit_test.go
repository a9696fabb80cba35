package analyzer

import (
	"strings"
	"testing"

	"github.com/retrylab/retrylab/timeline"
)

// TestClassifyResponse: the one rule that tells a rate limit from a
// refusal, on each signal alone and on its absence.
func TestClassifyResponse(t *testing.T) {
	ietf := `RateLimit-Policy: "second";q=10;w=1, "minute";q=300;w=60; RateLimit: "minute";r=0;t=12`
	tests := []struct {
		name string
		a    timeline.Attempt
		want ResponseClass
	}{
		{"200", timeline.Attempt{Status: 200}, ResponseSuccess},
		{"304", timeline.Attempt{Status: 304}, ResponseSuccess},
		{"200 with remaining 0 is still a success", timeline.Attempt{Status: 200, RateLimit: ietf}, ResponseSuccess},
		{"429 bare", timeline.Attempt{Status: 429}, ResponseRateLimit},
		{"503 bare", timeline.Attempt{Status: 503}, ResponseUnavailable},
		{"500", timeline.Attempt{Status: 500}, ResponseUnavailable},
		{"503 with Retry-After is an outage", timeline.Attempt{Status: 503, RetryAfter: "5", NotBefore: 5, HasNotBefore: true}, ResponseUnavailable},
		{"503 from a limit", timeline.Attempt{Status: 503, Limit: "minute"}, ResponseRateLimit},
		{"503 with remaining 0", timeline.Attempt{Status: 503, RateLimit: "X-RateLimit-Remaining: 0; X-RateLimit-Reset: 99"}, ResponseRateLimit},
		{"plain 403", timeline.Attempt{Status: 403}, ResponseRefusal},
		{"404", timeline.Attempt{Status: 404}, ResponseRefusal},
		{"403 with a usable Retry-After", timeline.Attempt{Status: 403, RetryAfter: "60", NotBefore: 60, HasNotBefore: true}, ResponseRateLimit},
		{"403 with a past date", timeline.Attempt{Status: 403, RetryAfter: "Thu, 01 Jan 2026 00:00:00 GMT", NotBefore: 0, HasNotBefore: true}, ResponseRateLimit},
		{"403 with a malformed Retry-After", timeline.Attempt{Status: 403, RetryAfter: "soon"}, ResponseRefusal},
		{"403 with IETF r=0", timeline.Attempt{Status: 403, RateLimit: ietf}, ResponseRateLimit},
		{"403 with IETF r=5", timeline.Attempt{Status: 403, RateLimit: strings.Replace(ietf, "r=0", "r=5", 1)}, ResponseRefusal},
		{"403 with X-RateLimit-Remaining: 0", timeline.Attempt{Status: 403, RateLimit: "X-RateLimit-Limit: 60; X-RateLimit-Remaining: 0; X-RateLimit-Reset: 1767225600"}, ResponseRateLimit},
		{"403 with X-RateLimit-Remaining: 12", timeline.Attempt{Status: 403, RateLimit: "X-RateLimit-Limit: 60; X-RateLimit-Remaining: 12; X-RateLimit-Reset: 1767225600"}, ResponseRefusal},
		{"403 from a tier's limit", timeline.Attempt{Status: 403, Limit: "free/minute"}, ResponseRateLimit},
		{"400 with Retry-After", timeline.Attempt{Status: 400, RetryAfter: "1", NotBefore: 1, HasNotBefore: true}, ResponseRateLimit},
		{"a reset 429 was never seen", timeline.Attempt{Status: 429, Fault: timeline.FaultAbandoned}, ResponseNone},
		{"reset", timeline.Attempt{Fault: timeline.FaultReset}, ResponseNone},
		{"no status", timeline.Attempt{}, ResponseNone},
		{"status 99", timeline.Attempt{Status: 99}, ResponseRefusal},
		{"status 700", timeline.Attempt{Status: 700}, ResponseRefusal},
	}
	for _, tt := range tests {
		if got := ClassifyResponse(&tt.a); got != tt.want {
			t.Errorf("%s: ClassifyResponse(%+v) = %s; want %s", tt.name, tt.a, got, tt.want)
		}
	}
	for c, want := range map[ResponseClass]bool{ResponseNone: false, ResponseSuccess: false, ResponseRateLimit: true, ResponseUnavailable: true, ResponseRefusal: false} {
		if c.Retryable() != want {
			t.Errorf("%s.Retryable() = %v; want %v", c, !want, want)
		}
	}
}

func TestRateLimitExhausted(t *testing.T) {
	tests := []struct {
		rec  string
		want bool
	}{
		{"", false},
		{`RateLimit: "minute";r=0;t=12`, true},
		{`RateLimit: "minute";r=1;t=12`, false},
		{`ratelimit: "minute"; r=0; t=12`, true}, // OWS after ';' and a lower-case name
		{`RateLimit: "second";r=4;t=1, "minute";r=0;t=30`, true},
		{`RateLimit: limit=10, remaining=0, reset=3`, true}, // the draft's dictionary form
		{`RateLimit: limit=10, remaining=7, reset=3`, false},
		{`RateLimit: "r=0";r=3`, false},                // a name is a quoted string, not a parameter
		{`RateLimit: "a;r=0";r=3`, false},              // ... even with a ';' inside
		{`RateLimit: "a\";r=0";r=3`, false},            // ... or an escaped quote
		{`RateLimit-Policy: "minute";q=0;w=60`, false}, // the policy says nothing about what is left
		{`RateLimit-Policy: "x; RateLimit: r=0";q=1`, false},
		{`RateLimit-Policy: "minute";q=300;w=60; RateLimit: "minute";r=0;t=12`, true},
		{`X-RateLimit-Remaining: 0`, true},
		{`x-ratelimit-remaining: 00`, true},
		{`X-RateLimit-Remaining: 0, 5`, true},
		{`X-RateLimit-Remaining: 10`, false},
		{`X-RateLimit-Remaining: -0`, false},
		{`X-RateLimit-Remaining: `, false},
		{`X-Rate-Limit-Remaining: 0`, true},
		{`RateLimit-Remaining: 0`, true},
		{`X-RateLimit-Limit: 0; X-RateLimit-Reset: 0`, false},
		{`X-RateLimit-Limit: 60; X-RateLimit-Remaining: 0; X-RateLimit-Reset: 1767225600`, true},
		{`Remaining: 0`, false},
		{`X-RateLimit-Remaining 0`, false},
		{`: 0`, false},
	}
	for _, tt := range tests {
		if got := RateLimitExhausted(tt.rec); got != tt.want {
			t.Errorf("RateLimitExhausted(%q) = %v; want %v", tt.rec, got, tt.want)
		}
	}
}

// FuzzRateLimitExhausted feeds arbitrary header records to the parser: it
// must not panic, must split a record into fields that join back into it,
// can only find a limit exhausted where a 0 is written, and must find the
// field a client reads when it is added on either side.
func FuzzRateLimitExhausted(f *testing.F) {
	for _, s := range []string{
		`RateLimit-Policy: "second";q=10;w=1, "minute";q=300;w=60; RateLimit: "minute";r=0;t=12`,
		`X-RateLimit-Limit: 60; X-RateLimit-Remaining: 0; X-RateLimit-Reset: 1767225600`,
		`RateLimit: "default";r=0;t=3`,
		`RateLimit: limit=10, remaining=0, reset=3`,
		`RateLimit: "a\";r=0";r=3`,
		`; ;: "`,
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rec string) {
		got := RateLimitExhausted(rec)
		if strings.Join(splitFields(rec), "; ") != rec {
			t.Errorf("splitFields(%q) = %q: does not join back", rec, splitFields(rec))
		}
		if got && !strings.Contains(rec, "0") {
			t.Errorf("RateLimitExhausted(%q) = true without a 0 in it", rec)
		}
		if !RateLimitExhausted("X-RateLimit-Remaining: 0; " + rec) {
			t.Errorf("RateLimitExhausted(%q) = false with X-RateLimit-Remaining: 0 first", "X-RateLimit-Remaining: 0; "+rec)
		}
		if !strings.ContainsAny(rec, `"`) && !RateLimitExhausted(rec+"; X-RateLimit-Remaining: 0") {
			t.Errorf("RateLimitExhausted(%q) = false with X-RateLimit-Remaining: 0 last", rec+"; X-RateLimit-Remaining: 0")
		}
		if RateLimitExhausted(rec) != got {
			t.Errorf("RateLimitExhausted(%q) is not deterministic", rec)
		}
	})
}
