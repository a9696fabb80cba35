package subjects_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/internal/memnet"
	"github.com/retrylab/retrylab/subjects"
	_ "github.com/retrylab/retrylab/subjects/thirdparty" // the third-party subjects
)

// countingServer answers each logical request (its path) from a script of
// statuses by attempt, and records every arrival.
type countingServer struct {
	script func(attempt int) (status int, retryAfter string)
	start  time.Time

	mu       sync.Mutex
	arrivals map[string][]time.Duration
}

func (s *countingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.arrivals[r.URL.Path] = append(s.arrivals[r.URL.Path], time.Since(s.start))
	n := len(s.arrivals[r.URL.Path])
	s.mu.Unlock()
	status, ra := s.script(n)
	if ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, "attempt %d", n)
}

func (s *countingServer) seen(path string) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrivals[path]
}

// reachRun runs one logical request through subject name against a real
// http.Server over memnet, inside a bubble, and returns what the server saw
// and what subjects.Classify made of the subject's answer.
type reachResult struct {
	arrivals []time.Duration
	result   string
	status   int
	attempts int
	body     string
}

func reachRun(t *testing.T, name string, method string, script func(int) (int, string), timeout time.Duration) reachResult {
	t.Helper()
	return reachRunPolicy(t, name, method, script, timeout, subjects.Policy{})
}

func reachRunPolicy(t *testing.T, name string, method string, script func(int) (int, string), timeout time.Duration, pol subjects.Policy) reachResult {
	t.Helper()
	var out reachResult
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		l := n.Listen()
		srv := &countingServer{script: script, start: time.Now(), arrivals: map[string][]time.Duration{}}
		hs := &http.Server{Handler: srv}
		go hs.Serve(l)
		tr := &http.Transport{DialContext: n.DialContext}

		s, err := subjects.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		caller := s.New(tr, subjects.Params{Client: 1, Rand: rand.New(rand.NewPCG(7, 8)), Policy: pol})
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		path := "/c/1/r/0"
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+l.Addr().String()+path, strings.NewReader("payload"))
		resp, err := caller(ctx, req)
		out.result, out.status, out.attempts = subjects.Classify(resp, err)
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			out.body = string(b)
			resp.Body.Close()
		}
		out.arrivals = srv.seen(path)

		tr.CloseIdleConnections()
		if err := hs.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		n.Close()
	})
	return out
}

var goSubjects = []string{
	"retrylab", "fixed-delay", "exp-no-jitter", "ignore-retry-after", "retry-4xx", "unbounded", "no-retry",
	"no-backoff", "no-idempotency-key", "no-pacing",
	"retryablehttp", "backoff", "failsafe", "resty", "retry-go", "go-retry",
	"discrete-delays", "clock-aligned", "capped-lockstep", "retry-after-plus-constant", // issue 11
	"no-retry-budget", // issue 15
}

func TestGoSubjectsListed(t *testing.T) {
	names := subjects.Names()
	if strings.Join(names, ",") != strings.Join(sortedCopy(goSubjects), ",") {
		t.Errorf("subjects.Names() = %v; want %v", names, sortedCopy(goSubjects))
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

// TestReachTransient: two 503s then a 200. Every subject but no-retry
// gets through on its third attempt, and the server's count, the
// subject's count and the body of the answer agree.
func TestReachTransient(t *testing.T) {
	script := func(n int) (int, string) {
		if n < 3 {
			return 503, ""
		}
		return 200, ""
	}
	for _, name := range goSubjects {
		t.Run(name, func(t *testing.T) {
			r := reachRun(t, name, "GET", script, time.Hour)
			want, wantRes := 3, subjects.ResultOK
			if name == "no-retry" {
				want, wantRes = 1, subjects.ResultGaveUp
			}
			if len(r.arrivals) != want || r.attempts != want || r.result != wantRes {
				t.Errorf("%s: server saw %d attempts, subject %d, result %q; want %d, %d, %q",
					name, len(r.arrivals), r.attempts, r.result, want, want, wantRes)
			}
			switch {
			case name == "no-retry":
				// The client, out of attempts, returns a *client.RetryError
				// (its last status 503), not the 503 itself.
				if r.body != "" || r.status != 503 {
					t.Errorf("%s: body %q, status %d; want none, 503", name, r.body, r.status)
				}
			case r.body != fmt.Sprintf("attempt %d", want):
				t.Errorf("%s: body = %q; want the answer to attempt %d", name, r.body, want)
			}
		})
	}
}

// TestReachAlways503: every attempt fails. Each subject stops where its
// library's defaults say (the harness's hour ends unbounded), and the
// server's count equals the subject's. retrylab and the controls derive
// their attempt cap (12) from the 30 s default budget, so the budget ends
// the jittered ones first, the controls whose mistake is not their backoff
// exactly where retrylab's does (they are the client, seeded alike); the
// instant ones run out of attempts, and fixed-delay, whose cap is sized
// for its constant 200 ms wait, spends the reference's retry budget (which
// every control but no-retry-budget and unbounded keeps: 100 retries of 5
// tokens of 500) after 101 attempts, 20 s into the call.
func TestReachAlways503(t *testing.T) {
	script := func(int) (int, string) { return 503, "" }
	want := map[string]struct {
		attempts int // 0: many (checked separately)
		result   string
	}{
		"retrylab":           {10, subjects.ResultBudget},
		"fixed-delay":        {101, subjects.ResultGaveUp},
		"exp-no-jitter":      {9, subjects.ResultBudget},
		"ignore-retry-after": {10, subjects.ResultBudget},
		"retry-4xx":          {10, subjects.ResultBudget},
		"unbounded":          {0, subjects.ResultError},
		"no-retry":           {1, subjects.ResultGaveUp},
		"no-backoff":         {12, subjects.ResultGaveUp},
		"no-idempotency-key": {10, subjects.ResultBudget},
		"no-pacing":          {10, subjects.ResultBudget},
		"retryablehttp":      {5, subjects.ResultGaveUp},
		"backoff":            {0, subjects.ResultBudget},
		"failsafe":           {3, subjects.ResultGaveUp},
		"resty":              {4, subjects.ResultGaveUp},
		"retry-go":           {10, subjects.ResultGaveUp},
		"go-retry":           {5, subjects.ResultGaveUp},
		// issue 11
		"discrete-delays":           {12, subjects.ResultGaveUp},
		"clock-aligned":             {12, subjects.ResultGaveUp},
		"capped-lockstep":           {9, subjects.ResultBudget},
		"retry-after-plus-constant": {10, subjects.ResultBudget},
		// issue 15: retrylab but for its retry budget, which one call
		// does not spend (9 retries of 5 tokens of 500)
		"no-retry-budget": {10, subjects.ResultBudget},
	}
	for _, name := range goSubjects {
		t.Run(name, func(t *testing.T) {
			r := reachRun(t, name, "GET", script, time.Hour)
			w := want[name]
			n := len(r.arrivals)
			if r.attempts != n || r.result != w.result || (w.attempts != 0 && n != w.attempts) || (w.attempts == 0 && n < 20) {
				t.Errorf("%s: server saw %d attempts, subject %d, result %q; want %d (0: many), equal, %q",
					name, n, r.attempts, r.result, w.attempts, w.result)
			}
			if w.result == subjects.ResultGaveUp && r.status != 503 {
				t.Errorf("%s: final status %d; want 503", name, r.status)
			}
			if name == "backoff" {
				if end := r.arrivals[n-1]; end > 15*time.Minute {
					t.Errorf("backoff: last attempt at %v; want within its 15m MaxElapsedTime", end)
				}
			}
		})
	}
}

// TestReachNotFound: a 404 is final for all but retry-4xx.
func TestReachNotFound(t *testing.T) {
	script := func(int) (int, string) { return 404, "" }
	for _, name := range goSubjects {
		t.Run(name, func(t *testing.T) {
			r := reachRun(t, name, "GET", script, time.Hour)
			want, wantRes := 1, subjects.ResultNonRetryable
			if name == "retry-4xx" {
				want, wantRes = 10, subjects.ResultBudget // the default 30s budget ends it, as retrylab's 503s
			}
			if len(r.arrivals) != want || r.attempts != want || r.status != 404 {
				t.Errorf("%s: server saw %d attempts, subject %d, status %d; want %d, %d, 404",
					name, len(r.arrivals), r.attempts, r.status, want, want)
			}
			if name != "retry-4xx" && r.result != wantRes {
				t.Errorf("%s: result %q; want %q", name, r.result, wantRes)
			}
		})
	}
}

// TestReachRetryAfter: a 429 with Retry-After: 5, then a 200. The subjects
// that read Retry-After wait at least 5s; the others come back earlier.
func TestReachRetryAfter(t *testing.T) {
	script := func(n int) (int, string) {
		if n == 1 {
			return 429, "5"
		}
		return 200, ""
	}
	ignores := map[string]bool{"ignore-retry-after": true, "resty": true, "retry-go": true, "go-retry": true}
	for _, name := range goSubjects {
		if name == "no-retry" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			r := reachRun(t, name, "GET", script, time.Hour)
			if len(r.arrivals) != 2 || r.result != subjects.ResultOK {
				t.Fatalf("%s: server saw %d attempts, result %q; want 2, ok", name, len(r.arrivals), r.result)
			}
			gap := r.arrivals[1] - r.arrivals[0]
			if honours := gap >= 5*time.Second; honours == ignores[name] {
				t.Errorf("%s: retried after %v with Retry-After: 5; honours = %v, want %v", name, gap, honours, !ignores[name])
			}
		})
	}
}

// TestReachPOST: a POST's body reaches the server on every attempt.
func TestReachPOST(t *testing.T) {
	for _, name := range goSubjects {
		if name == "no-retry" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []string
			synctest.Test(t, func(t *testing.T) {
				n := memnet.New()
				l := n.Listen()
				attempts := 0
				hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					mu.Lock()
					bodies = append(bodies, string(b))
					attempts++
					a := attempts
					mu.Unlock()
					if a == 1 {
						w.WriteHeader(503)
					}
				})}
				go hs.Serve(l)
				tr := &http.Transport{DialContext: n.DialContext}
				s, _ := subjects.Lookup(name)
				caller := s.New(tr, subjects.Params{Rand: rand.New(rand.NewPCG(1, 1))})
				req, _ := http.NewRequest("POST", "http://"+l.Addr().String()+"/c/1/r/0", strings.NewReader("payload"))
				req.Header.Set("Idempotency-Key", "k1")
				resp, err := caller(context.Background(), req)
				if err != nil {
					t.Fatalf("%s: POST: %v", name, err)
				}
				resp.Body.Close()
				tr.CloseIdleConnections()
				hs.Shutdown(context.Background())
			})
			if len(bodies) != 2 || bodies[0] != "payload" || bodies[1] != "payload" {
				t.Errorf("%s: server got bodies %q; want two \"payload\"", name, bodies)
			}
		})
	}
}

// TestFailsafeLeaksBodies documents why Counter.Finish exists: failsafehttp
// leaves the bodies of retried responses open.
func TestFailsafeLeaksBodies(t *testing.T) {
	var opened, closed int
	var mu sync.Mutex
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		opened++
		mu.Unlock()
		body := &closeSpy{onClose: func() { mu.Lock(); closed++; mu.Unlock() }}
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: body, Request: r}, nil
	})
	synctest.Test(t, func(t *testing.T) {
		s, _ := subjects.Lookup("failsafe")
		req, _ := http.NewRequest("GET", "http://stub/c/1/r/0", nil)
		_, err := s.New(next, subjects.Params{})(context.Background(), req)
		if res, _, _ := subjects.Classify(nil, err); res != subjects.ResultGaveUp {
			t.Errorf("failsafe on 503s = %q (%v); want gave-up", res, err)
		}
	})
	if opened != 3 || closed != 3 {
		t.Errorf("failsafe: %d responses, %d closed after the call; want 3, 3", opened, closed)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type closeSpy struct {
	once    sync.Once
	onClose func()
}

func (c *closeSpy) Read([]byte) (int, error) { return 0, io.EOF }
func (c *closeSpy) Close() error             { c.once.Do(c.onClose); return nil }

func TestDescribe(t *testing.T) {
	for _, name := range subjects.Names() {
		s, _ := subjects.Lookup(name)
		d, ok := s.(subjects.Describer)
		if !ok {
			t.Errorf("%s does not implement subjects.Describer", name)
			continue
		}
		info := d.Describe(subjects.Params{})
		if info.Version == "" || info.Summary == "" || info.Stated == nil {
			t.Errorf("%s.Describe = %+v; want version, summary and a stated policy", name, info)
		}
		if !strings.HasPrefix(info.Version, "v") && info.Version != "(devel)" {
			t.Errorf("%s version = %q; want a module version or (devel)", name, info.Version)
		}
	}
	s, _ := subjects.Lookup("retrylab")
	info := s.(subjects.Describer).Describe(subjects.Params{Policy: subjects.Policy{Base: time.Second, MaxAttempts: 3, Jitter: "equal"}})
	if st := info.Stated; st.Base != time.Second || st.MaxAttempts != 3 || st.Jitter != "equal" || st.Cap == 0 || st.Budget == 0 {
		t.Errorf("retrylab stated policy = %+v; want the given fields and the client's defaults", st)
	}
}

func TestClassify(t *testing.T) {
	resp := func(status int) *http.Response { return &http.Response{StatusCode: status} }
	tests := []struct {
		resp             *http.Response
		err              error
		result           string
		status, attempts int
	}{
		{resp(200), nil, subjects.ResultOK, 200, 0},
		{resp(204), nil, subjects.ResultOK, 204, 0},
		{resp(503), nil, subjects.ResultGaveUp, 503, 0},
		{resp(429), nil, subjects.ResultGaveUp, 429, 0},
		{resp(408), nil, subjects.ResultGaveUp, 408, 0},
		{resp(404), nil, subjects.ResultNonRetryable, 404, 0},
		{resp(418), nil, subjects.ResultNonRetryable, 418, 0},
		{resp(302), nil, subjects.ResultError, 302, 0},
		{nil, nil, subjects.ResultError, 0, 0},
		{nil, errors.New("boom"), subjects.ResultError, 0, 0},
		{nil, &subjects.Error{Result: subjects.ResultBudget, Status: 503, Attempts: 2}, subjects.ResultBudget, 503, 2},
		{nil, fmt.Errorf("wrapped: %w", &subjects.Error{Result: subjects.ResultGaveUp, Attempts: 4}), subjects.ResultGaveUp, 0, 4},
	}
	for _, tt := range tests {
		r, st, n := subjects.Classify(tt.resp, tt.err)
		if r != tt.result || st != tt.status || n != tt.attempts {
			t.Errorf("subjects.Classify(%v, %v) = %q, %d, %d; want %q, %d, %d", tt.resp, tt.err, r, st, n, tt.result, tt.status, tt.attempts)
		}
	}
}

// TestReplayable: subjects that say they replay make the same attempts at
// the same virtual instants in two runs with the same seed; backoff, which
// draws from the global source, does not.
func TestReplayable(t *testing.T) {
	script := func(n int) (int, string) {
		if n < 5 {
			return 503, ""
		}
		return 200, ""
	}
	for _, name := range goSubjects {
		s, _ := subjects.Lookup(name)
		replayable := s.(subjects.Describer).Describe(subjects.Params{}).Replayable
		if !replayable && name != "backoff" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			a := reachRun(t, name, "GET", script, time.Hour).arrivals
			b := reachRun(t, name, "GET", script, time.Hour).arrivals
			same := fmt.Sprint(a) == fmt.Sprint(b)
			if same != replayable {
				t.Errorf("%s: runs equal = %v (%v vs %v); want %v", name, same, a, b, replayable)
			}
		})
	}
}

// TestReachPolicy: the retrylab subject and the controls follow the
// scenario's policy: attempt cap, budget and backoff base.
func TestReachPolicy(t *testing.T) {
	script := func(int) (int, string) { return 503, "" }
	pol := subjects.Policy{Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond, MaxAttempts: 3, Budget: time.Minute, Jitter: "equal"}
	for _, name := range []string{"retrylab", "fixed-delay", "exp-no-jitter", "ignore-retry-after", "retry-4xx"} {
		t.Run(name, func(t *testing.T) {
			r := reachRunPolicy(t, name, "GET", script, time.Hour, pol)
			if n := len(r.arrivals); n != 3 || r.attempts != 3 || r.result != subjects.ResultGaveUp {
				t.Fatalf("%s: server saw %d, subject %d, result %q; want 3, 3, gave-up", name, n, r.attempts, r.result)
			}
			for i := 1; i < 3; i++ {
				if gap := r.arrivals[i] - r.arrivals[i-1]; gap < 5*time.Millisecond || gap > 20*time.Millisecond {
					t.Errorf("%s: wait before retry %d = %v; want within [5ms, 20ms]", name, i, gap)
				}
			}
		})
	}
	// A budget shorter than the first wait: the wait is redrawn once within
	// the budget, so two attempts, then result budget.
	pol = subjects.Policy{Base: 10 * time.Second, Cap: 10 * time.Second, Jitter: "equal", Budget: 2 * time.Second, MaxAttempts: 5}
	for _, name := range []string{"retrylab", "exp-no-jitter"} {
		r := reachRunPolicy(t, name, "GET", script, time.Hour, pol)
		if len(r.arrivals) != 2 || r.arrivals[1] >= 2*time.Second || r.result != subjects.ResultBudget {
			t.Errorf("%s with a 2s budget and 10s waits: attempts at %v, result %q; want 2, the second before 2s, budget", name, r.arrivals, r.result)
		}
	}
}
