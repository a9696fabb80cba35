package subjects

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
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

// controlsUnderTest are the reference client ("retrylab") and every
// negative control, by name.
func controlsUnderTest(t *testing.T) map[string]Subject {
	t.Helper()
	m := map[string]Subject{}
	for _, name := range append([]string{"retrylab"}, Controls()...) {
		s, err := Lookup(name)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", name, err)
		}
		m[name] = s
	}
	return m
}

// errReset is a transient transport error, as the client judges them.
var errReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

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
	measure func(t *testing.T, c Subject) bool
}{
	{"honours Retry-After", func(t *testing.T, c Subject) bool {
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
	{"does not retry 4xx", func(t *testing.T, c Subject) bool {
		for _, st := range []int{400, 401, 403, 404, 422} {
			s := newScripted(func(int, *http.Request) (*http.Response, error) { return answer(st), nil })
			res, got, _ := call(t, c.New(s, Params{}), "GET")
			if s.attempts() != 1 || res != ResultNonRetryable || got != st {
				return false
			}
		}
		return true
	}},
	{"retries 429/5xx and errors", func(t *testing.T, c Subject) bool {
		for _, st := range []int{429, 500, 502, 503, 504, 0} {
			s := newScripted(func(n int, _ *http.Request) (*http.Response, error) {
				if n == 1 {
					if st == 0 {
						return nil, errReset
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
	{"caps attempts", func(t *testing.T, c Subject) bool {
		s := newScripted(func(int, *http.Request) (*http.Response, error) { return answer(503), nil })
		res, st, _ := call(t, c.New(s, Params{Policy: Policy{MaxAttempts: 4, Base: time.Millisecond}}), "GET")
		return s.attempts() <= 4 && res == ResultGaveUp && st == 503
	}},
	{"keeps its budget", func(t *testing.T, c Subject) bool {
		s := newScripted(func(int, *http.Request) (*http.Response, error) {
			return answer(503, "Retry-After", "3600"), nil
		})
		start := time.Now()
		res, _, _ := call(t, c.New(s, Params{Policy: Policy{Budget: 10 * time.Second}}), "GET")
		return time.Since(start) <= 10*time.Second && (res == ResultBudget || res == ResultGaveUp)
	}},
	{"jitters", func(t *testing.T, c Subject) bool {
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
	{"waits exactly what Retry-After says", func(t *testing.T, c Subject) bool {
		// The client obeys a positive Retry-After to the nanosecond
		// (Config.RetryAfterJitter is zero in the harness), drawing no
		// backoff.
		for seed := range uint64(3) {
			s := newScripted(func(n int, _ *http.Request) (*http.Response, error) {
				if n == 1 {
					return answer(503, "Retry-After", "1"), nil
				}
				return answer(200), nil
			})
			call(t, c.New(s, Params{Rand: rand.New(rand.NewPCG(seed, seed))}), "GET")
			if g := s.gaps(); len(g) != 1 || g[0] != time.Second {
				return false
			}
		}
		return true
	}},
	{"backs off exponentially", func(t *testing.T, c Subject) bool {
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
	{"waits before retrying without Retry-After", func(t *testing.T, c Subject) bool {
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
	{"paces with the policy's rate", func(t *testing.T, c Subject) bool {
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
	{"sends POST retries with one Idempotency-Key", func(t *testing.T, c Subject) bool {
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
	{"bounds retries across calls", func(t *testing.T, c Subject) bool {
		// The client's retry budget: 500 tokens, 5 a retry; against a
		// server that stays down 30 calls of up to 5 attempts may make 100
		// retries, not 120. Each call ends within 10 s of virtual time
		// (unbounded's would not end by itself).
		s := newScripted(func(int, *http.Request) (*http.Response, error) { return answer(503), nil })
		caller := c.New(s, Params{Policy: Policy{Base: time.Millisecond, Cap: 10 * time.Millisecond, MaxAttempts: 5}})
		for range 30 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://stub/c/1/r/0", nil)
			if resp, _ := caller(ctx, req); resp != nil {
				resp.Body.Close()
			}
			cancel()
		}
		return s.attempts() <= 30+100
	}},
}

// TestControlsHaveOneMistake measures every property on the reference
// client (all hold) and on each control: exactly the properties its
// documented mistake breaks fail, and no other: every control keeps the
// reference's retry budget, so only no-retry-budget and unbounded, whose
// mistake is a missing bound, fail to bound retries across calls.
func TestControlsHaveOneMistake(t *testing.T) {
	const budget = "bounds retries across calls"
	breaks := map[string][]string{
		"retrylab":           nil,
		"no-retry-budget":    {budget},
		"fixed-delay":        {"jitters", "backs off exponentially"},
		"exp-no-jitter":      {"jitters"},
		"ignore-retry-after": {"honours Retry-After", "waits exactly what Retry-After says"},
		"retry-4xx":          {"does not retry 4xx"},
		"unbounded":          {budget, "caps attempts", "keeps its budget"},
		// issue 11: waves controls
		"discrete-delays":           {"jitters", "backs off exponentially"},
		"clock-aligned":             {"jitters", "backs off exponentially"},
		"capped-lockstep":           {"backs off exponentially"},
		"retry-after-plus-constant": {"waits exactly what Retry-After says"},
		"no-retry":                  {"honours Retry-After", "retries 429/5xx and errors", "backs off exponentially", "jitters", "waits exactly what Retry-After says", "waits before retrying without Retry-After", "sends POST retries with one Idempotency-Key"},
		"no-backoff":                {"backs off exponentially", "jitters", "waits before retrying without Retry-After"},
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
		res, _, _ := call(t, c.New(s, Params{Policy: pol}), "GET")
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
