package subjects

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/client"
)

// Dimensions of the client a control's mistake may change.
const (
	dimBackoff     = "backoff"      // the wait without a positive Retry-After
	dimRetryAfter  = "retry-after"  // the wait a positive Retry-After sets
	dimRetryable   = "retryable"    // which statuses are retried
	dimBounds      = "bounds"       // the attempt cap and the time budget
	dimRetries     = "retries"      // whether a call retries at all
	dimIdempotency = "idempotency"  // how a POST is retried
	dimPacing      = "pacing"       // the token bucket and the slow-down
	dimRetryBudget = "retry-budget" // the retries of all calls together
)

// controlDimension is the dimension each control's mistake changes.
// Every control keeps the reference's retry budget but the two whose
// mistake is a missing bound: no-retry-budget, and unbounded, which has
// no bound at all (controlBudgetless).
var controlDimension = map[string]string{
	"fixed-delay":               dimBackoff,
	"exp-no-jitter":             dimBackoff,
	"discrete-delays":           dimBackoff,
	"clock-aligned":             dimBackoff,
	"capped-lockstep":           dimBackoff,
	"no-backoff":                dimBackoff,
	"ignore-retry-after":        dimRetryAfter,
	"retry-after-plus-constant": dimRetryAfter,
	"retry-4xx":                 dimRetryable,
	"unbounded":                 dimBounds,
	"no-retry":                  dimRetries,
	"no-idempotency-key":        dimIdempotency,
	"no-pacing":                 dimPacing,
	"no-retry-budget":           dimRetryBudget,
}

// controlBudgetless are the controls whose mistake takes the retry budget
// away as well: their dimensions include dimRetryBudget.
var controlBudgetless = map[string]bool{"no-retry-budget": true, "unbounded": true}

// controlDims are the dimensions control name's mistake changes.
func controlDims(name string) []string {
	dims := []string{controlDimension[name]}
	if controlBudgetless[name] && dims[0] != dimRetryBudget {
		dims = append(dims, dimRetryBudget)
	}
	return dims
}

// session is a script of calls against a scripted server: the dimensions
// of the client it exercises, the policy, the calls' method, count and
// timeout, and the server's answer to each attempt (n counts the
// attempts of the whole session, from 1).
type session struct {
	name    string
	dims    []string
	policy  Policy
	method  string        // "" GET
	calls   int           // 0: 1
	timeout time.Duration // per call; 0: an hour
	respond func(n int, r *http.Request) (*http.Response, error)
}

// failThen answers the first k attempts with fail, then 200.
func failThen(k int, fail func(r *http.Request) (*http.Response, error)) func(int, *http.Request) (*http.Response, error) {
	return func(n int, r *http.Request) (*http.Response, error) {
		if n <= k {
			return fail(r)
		}
		return answer(200), nil
	}
}

func status(code int, header ...string) func(*http.Request) (*http.Response, error) {
	return func(*http.Request) (*http.Response, error) { return answer(code, header...), nil }
}

// always answers every attempt with fail.
func always(fail func(*http.Request) (*http.Response, error)) func(int, *http.Request) (*http.Response, error) {
	return func(_ int, r *http.Request) (*http.Response, error) { return fail(r) }
}

var sessions = []session{
	{name: "ok at once", respond: failThen(0, nil)},
	{name: "503 then ok", dims: []string{dimBackoff, dimRetries}, respond: failThen(1, status(503))},
	{name: "four 503s then ok, equal jitter", dims: []string{dimBackoff, dimRetries},
		policy: Policy{Base: 100 * time.Millisecond, Jitter: "equal"}, respond: failThen(4, status(503))},
	{name: "three 502s then ok, decorrelated jitter", dims: []string{dimBackoff, dimRetries},
		policy: Policy{Base: 100 * time.Millisecond, Cap: time.Second, Jitter: "decorrelated"}, respond: failThen(3, status(502))},
	{name: "connection reset then ok", dims: []string{dimBackoff, dimRetries},
		respond: failThen(1, func(*http.Request) (*http.Response, error) { return nil, errReset })},
	{name: "attempt timeout then ok", dims: []string{dimBackoff, dimRetries}, policy: Policy{Timeout: 2 * time.Second},
		respond: failThen(1, func(r *http.Request) (*http.Response, error) { <-r.Context().Done(); return nil, r.Context().Err() })},
	// A positive Retry-After wins over the backoff: the backoff controls
	// wait as the reference does.
	{name: "429 Retry-After 2 then ok", dims: []string{dimRetryAfter, dimRetries},
		respond: failThen(1, status(429, "Retry-After", "2"))},
	{name: "503 Retry-After date then ok", dims: []string{dimRetryAfter, dimRetries},
		respond: failThen(1, func(*http.Request) (*http.Response, error) {
			return answer(503, "Retry-After", time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat)), nil
		})},
	{name: "503 Retry-After with spaces then ok", dims: []string{dimRetryAfter, dimRetries},
		respond: failThen(1, status(503, "Retry-After", " 2\t"))},
	{name: "403 Retry-After 1 then ok", dims: []string{dimRetryAfter, dimRetries},
		respond: failThen(1, status(403, "Retry-After", "1"))},
	// A Retry-After that allows an immediate retry, or none usable, sets
	// no wait: the backoff applies, the Retry-After controls agree.
	{name: "503 Retry-After 0 then ok", dims: []string{dimBackoff, dimRetries},
		respond: failThen(1, status(503, "Retry-After", "0"))},
	{name: "503 Retry-After garbage then ok", dims: []string{dimBackoff, dimRetries},
		respond: failThen(2, status(503, "Retry-After", "1.5"))},
	{name: "404", dims: []string{dimRetryable}, respond: failThen(1, status(404))},
	{name: "403", dims: []string{dimRetryable}, respond: failThen(1, status(403))},
	{name: "422 then ok", dims: []string{dimRetryable}, respond: failThen(1, status(422))},
	{name: "POST 503 Retry-After 1 then ok", dims: []string{dimIdempotency, dimRetryAfter, dimRetries}, method: http.MethodPost,
		respond: failThen(1, status(503, "Retry-After", "1"))},
	{name: "503 for good, 4 attempts", dims: []string{dimBackoff, dimBounds, dimRetries},
		policy: Policy{Base: time.Millisecond, MaxAttempts: 4}, respond: always(status(503))},
	{name: "503 for good, 10 s budget", dims: []string{dimBackoff, dimBounds, dimRetries},
		policy: Policy{Base: 100 * time.Millisecond, Budget: 10 * time.Second}, respond: always(status(503))},
	{name: "503 Retry-After 3600, 10 s budget", dims: []string{dimRetryAfter, dimBounds, dimRetries},
		policy: Policy{Budget: 10 * time.Second}, respond: always(status(503, "Retry-After", "3600"))},
	{name: "rate 2/s, five calls", dims: []string{dimPacing}, policy: Policy{Rate: 2, Burst: 1}, calls: 5, respond: failThen(0, nil)},
	{name: "rate-limit headers: none remaining", dims: []string{dimPacing}, calls: 3, respond: func(n int, _ *http.Request) (*http.Response, error) {
		return answer(200, "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", strconv.Itoa(max(0, 2-n)), "X-RateLimit-Reset", "4"), nil
	}},
	{name: "30 calls against a server that stays down", dims: []string{dimRetryBudget, dimBackoff, dimBounds, dimRetries},
		policy: Policy{Base: time.Millisecond, Cap: 10 * time.Millisecond, MaxAttempts: 5}, calls: 30, timeout: 10 * time.Second,
		respond: always(status(503))},
}

// trace is what the server saw of a session and what the calls returned:
// one line per attempt (its instant, method and Idempotency-Key) and one
// per call (Classify's result, status and attempts).
func trace(t *testing.T, s Subject, ss session, seed uint64) string {
	t.Helper()
	var b strings.Builder
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := newScripted(func(n int, r *http.Request) (*http.Response, error) {
			fmt.Fprintf(&b, "attempt %d at %v: %s key %q\n", n, time.Since(start), r.Method, r.Header.Get("Idempotency-Key"))
			return ss.respond(n, r)
		})
		caller := s.New(srv, Params{Client: 1, Policy: ss.policy, Rand: rand.New(rand.NewPCG(seed, seed+1))})
		method := cmpOr(ss.method, http.MethodGet)
		for i := range max(ss.calls, 1) {
			ctx, cancel := context.WithTimeout(context.Background(), cmpOr(ss.timeout, time.Hour))
			req, _ := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://stub/c/1/r/%d", i), strings.NewReader("payload"))
			resp, err := caller(ctx, req)
			res, st, n := Classify(resp, err)
			if resp != nil {
				resp.Body.Close()
			}
			cancel()
			fmt.Fprintf(&b, "call %d at %v: %s, status %d, %d attempts\n", i, time.Since(start), res, st, n)
		}
	})
	return b.String()
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// TestControlsDifferOnlyByTheirMistake drives the reference client and
// every control through the same sessions with the same seeds and
// compares what the server saw (every attempt's instant, method and
// Idempotency-Key) and what each call returned. A control must agree with
// the reference, attempt for attempt and to the nanosecond, in every
// session that does not exercise its mistake's dimensions (the retry
// budget included: every control keeps the reference's but those whose
// mistake is to have none); and its mistake must show, in some session
// that exercises its dimension.
func TestControlsDifferOnlyByTheirMistake(t *testing.T) {
	ref, err := Lookup("retrylab")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Controls() {
		if _, ok := controlDimension[name]; !ok {
			t.Errorf("control %q has no dimension in controlDimension; add it", name)
		}
	}
	seeds := []uint64{1, 2}
	want := map[string]map[uint64]string{}
	for _, ss := range sessions {
		want[ss.name] = map[uint64]string{}
		for _, seed := range seeds {
			want[ss.name][seed] = trace(t, ref, ss, seed)
		}
	}
	for _, name := range Controls() {
		t.Run(name, func(t *testing.T) {
			c, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			dims := controlDims(name)
			dim := dims[0]
			shown := false
			for _, ss := range sessions {
				mine := slices.ContainsFunc(dims, func(d string) bool { return slices.Contains(ss.dims, d) })
				for _, seed := range seeds {
					got, w := trace(t, c, ss, seed), want[ss.name][seed]
					switch {
					case got != w && !mine:
						t.Errorf("%s, seed %d: %s differs from the reference outside its dimensions (%s):\n%s",
							ss.name, seed, name, strings.Join(dims, ", "), firstDiff(w, got))
					case got != w && slices.Contains(ss.dims, dim):
						shown = true
					}
				}
			}
			if !shown {
				t.Errorf("%s agrees with the reference in every session that exercises its dimension (%s): its mistake never shows", name, dim)
			}
		})
	}
}

// firstDiff names the first line where two traces differ.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d: reference %q, control %q", i+1, a, b)
		}
	}
	return "no difference"
}

// TestControlsParseRetryAfter: every control that reads Retry-After reads
// it with the client's parser (client.ParseRetryAfter): surrounding
// spaces and tabs trimmed, dates in other zones than GMT refused, a past
// date or "0" allowing an immediate retry (the backoff applies), huge
// values clamped. A usable positive value is waited exactly (plus Base for
// retry-after-plus-constant); any other value leaves the backoff, which
// ignore-retry-after always waits, to set the wait.
func TestControlsParseRetryAfter(t *testing.T) {
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) // a bubble's start
	values := []string{"", "0", "7", "-3", "1.5", "+2", "soon", " 5", "5\t",
		"Sat, 01 Jan 2000 00:00:15 GMT", "Fri, 31 Dec 1999 23:00:00 GMT",
		"Saturday, 01-Jan-00 00:00:09 GMT", "Saturday, 01-Jan-00 00:00:09 PST",
		"99999999999999999999", strconv.Itoa(1 << 40)}
	pol := Policy{Base: 100 * time.Millisecond, Budget: time.Minute}
	for _, name := range Controls() {
		if name == "no-retry" || name == "unbounded" {
			continue // no retry to wait for; no budget to end a huge wait
		}
		s, _ := Lookup(name)
		for _, v := range values {
			ra, ok := client.ParseRetryAfter(v, now)
			var gap time.Duration
			synctest.Test(t, func(t *testing.T) {
				if !time.Now().Equal(now) {
					t.Fatalf("bubble starts at %v; want %v", time.Now(), now)
				}
				srv := newScripted(func(n int, _ *http.Request) (*http.Response, error) {
					if n == 1 {
						return answer(503, "Retry-After", v), nil
					}
					return answer(200), nil
				})
				call(t, s.New(srv, Params{Policy: pol, Rand: rand.New(rand.NewPCG(1, 2))}), "GET")
				if g := srv.gaps(); len(g) == 1 {
					gap = g[0]
				} else {
					gap = -1 // no retry: the wait would cross the budget
				}
			})
			honoured := ok && ra > 0 && name != "ignore-retry-after"
			switch {
			case honoured && ra >= pol.Budget:
				if gap != -1 {
					t.Errorf("%s, Retry-After %q (%v): retried after %v; want no retry (past the budget)", name, v, ra, gap)
				}
			case honoured && name == "retry-after-plus-constant":
				if gap != ra+pol.Base {
					t.Errorf("%s, Retry-After %q: waited %v; want %v + Base", name, v, gap, ra)
				}
			case honoured:
				if gap != ra {
					t.Errorf("%s, Retry-After %q: waited %v; want exactly %v", name, v, gap, ra)
				}
			default:
				// The backoff: no more than a second for every backoff
				// control at Base 100 ms, and never the Retry-After's.
				if gap < 0 || gap > 2*time.Second {
					t.Errorf("%s, Retry-After %q (usable %v, %v): waited %v; want its first backoff", name, v, ok, ra, gap)
				}
			}
		}
	}
}

// TestExpNoJitterWaitsCeiling: exp-no-jitter waits client.Ceiling before
// each retry, min(Cap, Base·2^(n-1)), to the nanosecond.
func TestExpNoJitterWaitsCeiling(t *testing.T) {
	s, _ := Lookup("exp-no-jitter")
	for _, pol := range []Policy{
		{Base: 100 * time.Millisecond, Cap: time.Second, MaxAttempts: 7, Budget: time.Hour},
		{Base: 3 * time.Millisecond, Cap: 40 * time.Millisecond, MaxAttempts: 9, Jitter: "equal"},
		{Base: time.Second, Cap: time.Second, MaxAttempts: 3},
	} {
		synctest.Test(t, func(t *testing.T) {
			srv := newScripted(func(int, *http.Request) (*http.Response, error) { return answer(503), nil })
			call(t, s.New(srv, Params{Policy: pol}), "GET")
			g := srv.gaps()
			if len(g) != pol.MaxAttempts-1 {
				t.Fatalf("%+v: %d waits; want %d", pol, len(g), pol.MaxAttempts-1)
			}
			for i, d := range g {
				if want := client.Ceiling(pol.Base, pol.Cap, i+1); d != want {
					t.Errorf("%+v: wait %d = %v; want client.Ceiling = %v", pol, i+1, d, want)
				}
			}
		})
	}
}

// FuzzControlsRetryAfter: whatever a 503's Retry-After says, the controls
// whose mistake is not about Retry-After, backoff or retrying at all wait
// exactly as the reference does, and ignore-retry-after waits as the
// reference does for a 503 with no Retry-After.
func FuzzControlsRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "7", "-3", "1.5", "soon", " 5", "Sat, 01 Jan 2000 00:00:05 GMT",
		"99999999999999999999", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.ContainsAny(v, "\r\n\x00") {
			return // not a header value
		}
		pol := Policy{Base: 100 * time.Millisecond, Budget: 20 * time.Second}
		with := session{name: "with", policy: pol, respond: failThen(2, status(503, "Retry-After", v))}
		without := session{name: "without", policy: pol, respond: failThen(2, status(503))}
		ref, _ := Lookup("retrylab")
		want := trace(t, ref, with, 1)
		for _, name := range []string{"no-retry-budget", "retry-4xx", "no-idempotency-key", "no-pacing"} {
			s, _ := Lookup(name)
			if got := trace(t, s, with, 1); got != want {
				t.Errorf("Retry-After %q: %s differs from the reference: %s", v, name, firstDiff(want, got))
			}
		}
		s, _ := Lookup("ignore-retry-after")
		if got, w := trace(t, s, with, 1), trace(t, ref, without, 1); got != w {
			t.Errorf("Retry-After %q: ignore-retry-after differs from the reference without one: %s", v, firstDiff(w, got))
		}
	})
}
