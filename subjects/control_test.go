package subjects

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// scripted is a RoundTripper that answers from a function of the attempt
// number (1-based) and records when each attempt arrived.
type scripted struct {
	start   time.Time
	respond func(n int, r *http.Request) (*http.Response, error)

	mu    sync.Mutex
	times []time.Duration
	keys  []string
}

func newScripted(respond func(n int, r *http.Request) (*http.Response, error)) *scripted {
	return &scripted{start: time.Now(), respond: respond}
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.times = append(s.times, time.Since(s.start))
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	n := len(s.times)
	s.mu.Unlock()
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	resp, err := s.respond(n, r)
	if resp != nil {
		resp.Request = r
	}
	return resp, err
}

func (s *scripted) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.times)
}

// gaps returns the waits between consecutive attempts.
func (s *scripted) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(s.times); i++ {
		g = append(g, s.times[i]-s.times[i-1])
	}
	return g
}

func answer(status int, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("body"))}
}

// clientControls are the negative controls built on the client package
// rather than the control loop.
var clientControls = map[string]bool{"no-retry-budget": true}

// correct is the control loop without a mistake: the reference every
// control must differ from in exactly its one property.
var correct = &control{name: "correct", mistake: "none"}

func controlsUnderTest(t *testing.T) map[string]*control {
	t.Helper()
	m := map[string]*control{"correct": correct}
	for _, name := range Controls() {
		s, err := Lookup(name)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", name, err)
		}
		c, ok := s.(*control)
		if !ok {
			// The client's own controls; TestNoRetryBudget measures them.
			if !clientControls[name] {
				t.Fatalf("control %q is %T, neither the control loop nor a known client control", name, s)
			}
			continue
		}
		m[name] = c
	}
	return m
}

func call(t *testing.T, c Caller, method string) (result string, status, attempts int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, "http://stub/c/1/r/0", strings.NewReader("payload"))
	resp, err := c(ctx, req)
	if resp != nil {
		defer resp.Body.Close()
	}
	return Classify(resp, err)
}

// Each property of a correct retry loop, measured on one control.
var properties = []struct {
	name    string
	measure func(t *testing.T, c *control) bool
}{
	{"honours Retry-After", func(t *testing.T, c *control) bool {
		s := newScripted(func(n int, _ *http.Request) (*http.Response, error) {
			if n == 1 {
				return answer(503, "Retry-After", "3"), nil
			}
			return answer(200), nil
		})
		res, _, _ := call(t, c.New(s, Params{Rand: rand.New(rand.NewPCG(1, 2))}), "GET")
		g := s.gaps()
		return res == ResultOK && len(g) == 1 && g[0] >= 3*time.Second
	}},
	{"does not retry 4xx", func(t *testing.T, c *control) bool {
		for _, st := range []int{400, 401, 403, 404, 422} {
			s := newScripted(func(int, *http.Request) (*http.Response, error) { return answer(st), nil })
			res, got, _ := call(t, c.New(s, Params{}), "GET")
			if s.attempts() != 1 || res != ResultNonRetryable || got != st {
				return false
			}
		}
		return true
	}},
	{"retries 429/5xx and errors", func(t *testing.T, c *control) bool {
		for _, st := range []int{429, 500, 502, 503, 504, 0} {
			s := newScripted(func(n int, _ *http.Request) (*http.Response, error) {
				if n == 1 {
					if st == 0 {
						return nil, errors.New("connection reset")
					}
					return answer(st), nil
				}
				return answer(200), nil
			})
			res, _, _ := call(t, c.New(s, Params{}), "GET")
			if s.attempts() != 2 || res != ResultOK {
				return false
			}
		}
		return true
	}},
	{"caps attempts", func(t *testing.T, c *control) bool {
		s := newScripted(func(int, *http.Request) (*http.Response, error) { return answer(503), nil })
		res, st, _ := call(t, c.New(s, Params{Policy: Policy{MaxAttempts: 4, Base: time.Millisecond}}), "GET")
		return s.attempts() <= 4 && res == ResultGaveUp && st == 503
	}},
	{"keeps its budget", func(t *testing.T, c *control) bool {
		s := newScripted(func(int, *http.Request) (*http.Response, error) {
			return answer(503, "Retry-After", "3600"), nil
		})
		start := time.Now()
		res, _, _ := call(t, c.New(s, Params{Policy: Policy{Budget: 10 * time.Second}}), "GET")
		return time.Since(start) <= 10*time.Second && (res == ResultBudget || res == ResultGaveUp)
	}},
	{"jitters", func(t *testing.T, c *control) bool {
		seen := map[time.Duration]bool{}
		for seed := range uint64(10) {
			s := newScripted(func(n int, _ *http.Request) (*http.Response, error) {
				if n == 1 {
					return answer(503), nil
				}
				return answer(200), nil
			})
			call(t, c.New(s, Params{Rand: rand.New(rand.NewPCG(seed, seed))}), "GET")
			for _, g := range s.gaps() {
				seen[g] = true
			}
		}
		return len(seen) >= 5
	}},
	{"jitters on top of Retry-After", func(t *testing.T, c *control) bool {
		seen := map[time.Duration]bool{}
		for seed := range uint64(10) {
			s := newScripted(func(n int, _ *http.Request) (*http.Response, error) {
				if n == 1 {
					return answer(503, "Retry-After", "1"), nil
				}
				return answer(200), nil
			})
			call(t, c.New(s, Params{Rand: rand.New(rand.NewPCG(seed, seed))}), "GET")
			for _, g := range s.gaps() {
				seen[g] = true
			}
		}
		return len(seen) >= 5
	}},
	{"backs off exponentially", func(t *testing.T, c *control) bool {
		// Equal jitter: wait n lies in [ceil/2, ceil], ceil = 100ms·2^(n-1).
		s := newScripted(func(int, *http.Request) (*http.Response, error) { return answer(503), nil })
		pol := Policy{Base: 100 * time.Millisecond, Cap: time.Hour, MaxAttempts: 5, Jitter: "equal"}
		call(t, c.New(s, Params{Policy: pol, Rand: rand.New(rand.NewPCG(3, 4))}), "GET")
		g := s.gaps()
		if len(g) < 4 {
			return false
		}
		for i, d := range g[:4] {
			ceil := 100 * time.Millisecond << i
			if d < ceil/2 || d > ceil {
				return false
			}
		}
		return true
	}},
	{"waits before retrying without Retry-After", func(t *testing.T, c *control) bool {
		// Equal jitter: the first wait lies in [Base/2, Base].
		s := newScripted(func(n int, _ *http.Request) (*http.Response, error) {
			if n == 1 {
				return answer(503), nil
			}
			return answer(200), nil
		})
		pol := Policy{Base: 100 * time.Millisecond, Jitter: "equal"}
		res, _, _ := call(t, c.New(s, Params{Policy: pol, Rand: rand.New(rand.NewPCG(5, 6))}), "GET")
		g := s.gaps()
		return res == ResultOK && len(g) == 1 && g[0] >= 50*time.Millisecond
	}},
	{"paces with the policy's rate", func(t *testing.T, c *control) bool {
		// Rate 1/s, burst 1: three calls that succeed at once go out a
		// second apart.
		s := newScripted(func(int, *http.Request) (*http.Response, error) { return answer(200), nil })
		caller := c.New(s, Params{Policy: Policy{Rate: 1, Burst: 1}})
		for range 3 {
			if res, _, _ := call(t, caller, "GET"); res != ResultOK {
				return false
			}
		}
		g := s.gaps()
		return len(g) == 2 && g[0] >= 999*time.Millisecond && g[1] >= 999*time.Millisecond
	}},
	{"sends POST retries with one Idempotency-Key", func(t *testing.T, c *control) bool {
		s := newScripted(func(n int, _ *http.Request) (*http.Response, error) {
			if n < 3 {
				return answer(503), nil
			}
			return answer(200), nil
		})
		res, _, _ := call(t, c.New(s, Params{Policy: Policy{Base: time.Millisecond}}), "POST")
		if res != ResultOK || len(s.keys) != 3 {
			return false
		}
		return s.keys[0] != "" && s.keys[0] == s.keys[1] && s.keys[1] == s.keys[2]
	}},
}

// TestControlsHaveOneMistake measures every property on the correct loop
// (all hold) and on each control: exactly the properties its documented
// mistake breaks fail, and no other.
func TestControlsHaveOneMistake(t *testing.T) {
	breaks := map[string][]string{
		"correct":            nil,
		"fixed-delay":        {"jitters", "jitters on top of Retry-After", "backs off exponentially"},
		"exp-no-jitter":      {"jitters", "jitters on top of Retry-After"},
		"ignore-retry-after": {"honours Retry-After"},
		"retry-4xx":          {"does not retry 4xx"},
		"unbounded":          {"caps attempts", "keeps its budget"},
		// issue 11: waves controls
		"discrete-delays":           {"jitters", "jitters on top of Retry-After", "backs off exponentially"},
		"clock-aligned":             {"jitters", "jitters on top of Retry-After", "backs off exponentially"},
		"capped-lockstep":           {"backs off exponentially"},
		"retry-after-plus-constant": {"jitters on top of Retry-After"},
		"no-retry":                  {"honours Retry-After", "retries 429/5xx and errors", "backs off exponentially", "jitters", "jitters on top of Retry-After", "waits before retrying without Retry-After", "sends POST retries with one Idempotency-Key"},
		"no-backoff":                {"backs off exponentially", "jitters", "jitters on top of Retry-After", "waits before retrying without Retry-After"},
		"no-idempotency-key":        {"sends POST retries with one Idempotency-Key"},
		"no-pacing":                 {"paces with the policy's rate"},
	}
	cs := controlsUnderTest(t)
	if len(cs) != len(breaks) {
		t.Fatalf("controls = %d; want %d (update this test)", len(cs), len(breaks))
	}
	for name, c := range cs {
		t.Run(name, func(t *testing.T) {
			want := map[string]bool{}
			for _, p := range breaks[name] {
				want[p] = true
			}
			for _, p := range properties {
				var holds bool
				synctest.Test(t, func(t *testing.T) { holds = p.measure(t, c) })
				if holds == want[p.name] {
					t.Errorf("%s: %q holds = %v; want %v", name, p.name, holds, !want[p.name])
				}
			}
		})
	}
}

// TestUnboundedRunsUntilContextEnds shows the unbounded control never
// stops by itself: only the caller's context ends it.
func TestUnboundedRunsUntilContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScripted(func(int, *http.Request) (*http.Response, error) { return answer(503), nil })
		c, _ := Lookup("unbounded")
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://stub/c/1/r/0", nil)
		_, err := c.New(s, Params{Policy: Policy{Cap: time.Second}})(ctx, req)
		res, _, n := Classify(nil, err)
		if res != ResultError || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("unbounded after an hour = %q, %v; want error wrapping DeadlineExceeded", res, err)
		}
		if n < 3600/2 || s.attempts() != n {
			t.Errorf("unbounded made %d attempts (server saw %d) in an hour with a 1s cap; want thousands, equal", n, s.attempts())
		}
	})
}

func TestControlTimeoutAndPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Each attempt hangs until its per-attempt timeout; then a 200.
		s := newScripted(func(n int, r *http.Request) (*http.Response, error) {
			if n <= 2 {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			return answer(200), nil
		})
		c, _ := Lookup("exp-no-jitter")
		pol := Policy{Base: time.Second, Timeout: 5 * time.Second, Rate: 0.1, Burst: 1}
		res, _, _ := call(t, c.(*control).New(s, Params{Policy: pol}), "GET")
		if res != ResultOK {
			t.Fatalf("result = %q; want ok", res)
		}
		// Attempt 1 at 0 times out at 5s; the bucket (one per 10s) lets
		// attempt 2 go at 10s; it times out at 15s; attempt 3 at 20s.
		// (x/time/rate's float arithmetic may grant a token a hair early.)
		want := []time.Duration{0, 10 * time.Second, 20 * time.Second}
		got := s.times
		if len(got) != len(want) {
			t.Fatalf("attempt times = %v; want %v", got, want)
		}
		for i := range want {
			if d := got[i] - want[i]; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("attempt %d at %v; want %v (±1ms)", i+1, got[i], want[i])
			}
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"7", 7 * time.Second, true},
		{"-3", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{" 5", 0, false},
		{"Fri, 02 Jan 2026 03:04:15 GMT", 10 * time.Second, true},
		{"Fri, 02 Jan 2026 03:00:00 GMT", 0, true},
		{"99999999999999999999", 1<<63 - 1, true},
		{strconv.Itoa(1 << 40), 1<<63 - 1, true},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestExpCeil(t *testing.T) {
	tests := []struct {
		base, cap time.Duration
		n         int
		want      time.Duration
	}{
		{100, 1000, 1, 100},
		{100, 1000, 2, 200},
		{100, 1000, 4, 800},
		{100, 1000, 5, 1000},
		{100, 1000, 500, 1000},
		{time.Hour, 1<<63 - 1, 100, 1<<63 - 1},
	}
	for _, tt := range tests {
		if got := expCeil(tt.base, tt.cap, tt.n); got != tt.want {
			t.Errorf("expCeil(%v, %v, %d) = %v; want %v", tt.base, tt.cap, tt.n, got, tt.want)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "7", "-3", "1.5", "soon", "Fri, 02 Jan 2026 03:04:15 GMT", "99999999999999999999", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseRetryAfter(s, now)
		if d < 0 {
			t.Fatalf("parseRetryAfter(%q) = %v; want ≥ 0", s, d)
		}
		if !ok && d != 0 {
			t.Fatalf("parseRetryAfter(%q) = %v, false; want 0 when unusable", s, d)
		}
		if ok && isDigits(s) && len(s) < 10 {
			if n, _ := strconv.Atoi(s); d != time.Duration(n)*time.Second {
				t.Fatalf("parseRetryAfter(%q) = %v; want %ds", s, d, n)
			}
		}
	})
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		p    Policy
		want string // substring of the error; "" for none
	}{
		{Policy{}, ""},
		{Policy{Base: time.Second, Cap: time.Minute, MaxAttempts: 3, Budget: time.Minute, Jitter: "decorrelated", Rate: 5, Burst: 2, Timeout: time.Second}, ""},
		{Policy{Base: -1}, "policy.base"},
		{Policy{Cap: -1}, "policy.cap"},
		{Policy{MaxAttempts: -1}, "policy.max_attempts"},
		{Policy{Budget: -1}, "policy.budget"},
		{Policy{Rate: -1}, "policy.rate"},
		{Policy{Burst: -1}, "policy.burst"},
		{Policy{Timeout: -1}, "policy.timeout"},
		{Policy{Jitter: "none"}, "policy.jitter"},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v.Validate() = %v; want error containing %q", tt.p, err, tt.want)
		}
	}
}
