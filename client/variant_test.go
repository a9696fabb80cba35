package client

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/client/internal/variant"
)

// newVariant is clientcontrol.New, which this package's tests cannot
// import: New with the departures v, set through the hook it installs.
func newVariant(next http.RoundTripper, cfg Config, v variant.Variant) *Transport {
	t := New(next, cfg)
	variant.Set(t, v)
	return t
}

// variantRun sends calls requests of method, one after the other, through
// the Transport mk makes over f (answering with respond) from cfg, seeded;
// it returns each call's outcome and what f saw (instant, method and
// Idempotency-Key of each attempt).
func variantRun(t *testing.T, mk func(http.RoundTripper, Config) *Transport, cfg Config, method string, calls int, respond func(n int, req *http.Request) (*http.Response, error)) string {
	t.Helper()
	var out strings.Builder
	synctest.Test(t, func(t *testing.T) {
		f := newFake(respond)
		cfg.Rand = rand.New(rand.NewPCG(3, 4))
		tr := mk(f, cfg)
		for range calls {
			req, _ := http.NewRequest(method, "http://api.test/x", strings.NewReader("payload"))
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				fmt.Fprintf(&out, "status %d\n", resp.StatusCode)
				Drain(resp)
			} else {
				fmt.Fprintf(&out, "error %v\n", err)
			}
		}
		for _, s := range f.attempts() {
			fmt.Fprintf(&out, "%v %s %q\n", s.at, s.method, s.header.Get("Idempotency-Key"))
		}
	})
	return out.String()
}

// TestVariant: the zero Variant is New, draw for draw; each field departs
// from New where its doc says, and only there.
func TestVariant(t *testing.T) {
	ra := func(v string) func(int, *http.Request) (*http.Response, error) {
		return func(n int, _ *http.Request) (*http.Response, error) {
			if n < 2 {
				return reply(503, "Retry-After", v), nil
			}
			return reply(200), nil
		}
	}
	bare := statuses(503, 503, 503, 200)
	limits := func(n int, _ *http.Request) (*http.Response, error) {
		return reply(200, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "6"), nil
	}
	ceiling := func(_ *rand.Rand, n int, _ time.Duration) time.Duration { return Ceiling(time.Second, time.Hour, n) }
	base := Config{Base: 100 * time.Millisecond, AddIdempotencyKey: true}
	tests := []struct {
		name    string
		v       variant.Variant
		method  string
		calls   int
		respond func(int, *http.Request) (*http.Response, error)
		same    bool   // the same trace as New's
		want    string // a line the trace must hold, when it differs
	}{
		{"zero variant, bare 503s", variant.Variant{}, "GET", 1, bare, true, ""},
		{"zero variant, POST", variant.Variant{}, "POST", 1, ra("1"), true, ""},
		{"backoff", variant.Variant{Backoff: ceiling}, "GET", 1, bare, false, "7s GET \"\""},
		{"backoff under a positive Retry-After", variant.Variant{Backoff: ceiling}, "GET", 1, ra("2"), true, ""},
		{"negative backoff is none", variant.Variant{Backoff: func(*rand.Rand, int, time.Duration) time.Duration { return -time.Hour }}, "GET", 1, bare, false, "0s GET \"\""},
		{"ignore Retry-After", variant.Variant{IgnoreRetryAfter: true}, "GET", 1, ra("30"), false, "status 200"},
		{"ignore Retry-After, none sent", variant.Variant{IgnoreRetryAfter: true}, "GET", 1, bare, true, ""},
		{"Retry-After extra", variant.Variant{RetryAfterExtra: func(*rand.Rand) time.Duration { return time.Second }}, "GET", 1, ra("2"), false, "6s GET \"\""},
		{"Retry-After extra, Retry-After 0", variant.Variant{RetryAfterExtra: func(*rand.Rand) time.Duration { return time.Second }}, "GET", 1, ra("0"), true, ""},
		{"retry without key", variant.Variant{RetryWithoutKey: true}, "POST", 1, ra("1"), false, "1s POST \"\""},
		{"retry without key, GET", variant.Variant{RetryWithoutKey: true}, "GET", 1, ra("1"), true, ""},
		{"no slow-down", variant.Variant{NoSlowDown: true}, "GET", 3, limits, false, "0s GET \"\""},
		{"no slow-down, Retry-After", variant.Variant{NoSlowDown: true}, "GET", 1, ra("1"), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := variantRun(t, New, base, tt.method, tt.calls, tt.respond)
			zero := variantRun(t, func(next http.RoundTripper, cfg Config) *Transport { return newVariant(next, cfg, variant.Variant{}) },
				base, tt.method, tt.calls, tt.respond)
			got := variantRun(t, func(next http.RoundTripper, cfg Config) *Transport { return newVariant(next, cfg, tt.v) },
				base, tt.method, tt.calls, tt.respond)
			if zero != ref {
				t.Fatalf("newVariant with the zero Variant:\n%s\nNew:\n%s", zero, ref)
			}
			if tt.same != (got == ref) {
				t.Errorf("trace equal to New's = %v; want %v\nNew:\n%s\nvariant:\n%s", got == ref, tt.same, ref, got)
			}
			if !tt.same && !strings.Contains(got, tt.want+"\n") {
				t.Errorf("variant trace lacks %q:\n%s", tt.want, got)
			}
		})
	}
}
