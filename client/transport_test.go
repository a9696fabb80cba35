package client

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// sent is one attempt seen by a fake next transport.
type sent struct {
	at     time.Duration // since the fake was made
	method string
	header http.Header
	body   string
	ctx    context.Context
}

// fake is a next RoundTripper that records attempts and answers with
// respond(n) for the n-th attempt (0-based).
type fake struct {
	start   time.Time
	respond func(n int, req *http.Request) (*http.Response, error)

	mu     sync.Mutex
	sent   []sent
	bodies []*trackedBody
}

func newFake(respond func(n int, req *http.Request) (*http.Response, error)) *fake {
	return &fake{start: time.Now(), respond: respond}
}

func (f *fake) RoundTrip(req *http.Request) (*http.Response, error) {
	var body string
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body.Close()
		body = string(b)
	}
	f.mu.Lock()
	n := len(f.sent)
	f.sent = append(f.sent, sent{at: time.Since(f.start), method: req.Method, header: req.Header, body: body, ctx: req.Context()})
	f.mu.Unlock()
	resp, err := f.respond(n, req)
	if resp != nil {
		if tb, ok := resp.Body.(*trackedBody); ok {
			f.mu.Lock()
			f.bodies = append(f.bodies, tb)
			f.mu.Unlock()
		}
		resp.Request = req
	}
	return resp, err
}

func (f *fake) attempts() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.sent...)
}

// trackedBody records how much of it was read and whether it was closed.
type trackedBody struct {
	r      *strings.Reader
	read   atomic.Int64
	closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}
func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// reply makes a response with status, header pairs and a tracked body.
func reply(status int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: &trackedBody{r: strings.NewReader("body of " + fmt.Sprint(status))}}
}

// statuses answers the n-th attempt with codes[n], the last one repeated.
func statuses(codes ...int) func(int, *http.Request) (*http.Response, error) {
	return func(n int, _ *http.Request) (*http.Response, error) {
		return reply(codes[min(n, len(codes)-1)]), nil
	}
}

func get(t *testing.T, rt http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt.RoundTrip(req)
}

func seeded(cfg Config) Config {
	cfg.Rand = rand.New(rand.NewPCG(1, 1))
	return cfg
}

func TestSuccessPassesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(200))
		resp, err := get(t, New(f, Config{}), "http://api.test/x")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want 200, nil", resp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "body of 200" {
			t.Errorf("body = %q; want %q", b, "body of 200")
		}
		if n := len(f.attempts()); n != 1 {
			t.Errorf("attempts = %d; want 1", n)
		}
		if !f.bodies[0].closed.Load() {
			t.Error("closing the returned body did not close the next transport's body")
		}
	})
}

func TestNonRetryableFailsFast(t *testing.T) {
	for _, code := range []int{400, 401, 403, 404, 409, 422, 501, 505, 302, 201} {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(statuses(code, 200))
			start := time.Now()
			resp, err := get(t, New(f, Config{}), "http://api.test/x")
			if err != nil || resp.StatusCode != code {
				t.Fatalf("status %d: RoundTrip = %v, %v; want the %d response, nil", code, resp, err, code)
			}
			resp.Body.Close()
			if n := len(f.attempts()); n != 1 {
				t.Errorf("status %d: attempts = %d; want 1", code, n)
			}
			if d := time.Since(start); d != 0 {
				t.Errorf("status %d: call took %v; want no wait", code, d)
			}
		})
	}
}

func TestRetriesRetryableStatuses(t *testing.T) {
	for _, code := range []int{429, 500, 502, 503, 504} {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(statuses(code, code, 200))
			resp, err := get(t, New(f, seeded(Config{})), "http://api.test/x")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d: RoundTrip = %v, %v; want 200", code, resp, err)
			}
			resp.Body.Close()
			a := f.attempts()
			if len(a) != 3 {
				t.Fatalf("status %d: attempts = %d; want 3", code, len(a))
			}
			// Full jitter with the defaults: wait n in [0, base·2^(n-1)].
			for i := 1; i < len(a); i++ {
				if w, hi := a[i].at-a[i-1].at, Ceiling(DefaultBase, DefaultCap, i); w < 0 || w > hi {
					t.Errorf("status %d: wait before retry %d = %v; want in [0, %v]", code, i, w, hi)
				}
			}
			for i, b := range f.bodies[:2] {
				if !b.closed.Load() || b.r.Len() != 0 {
					t.Errorf("status %d: retried response %d closed=%v unread=%d; want drained and closed", code, i+1, b.closed.Load(), b.r.Len())
				}
			}
		})
	}
}

func TestCustomRetryableSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(503, 200))
		resp, err := get(t, New(f, Config{Retryable: []int{429}}), "http://api.test/x")
		if err != nil || resp.StatusCode != 503 || len(f.attempts()) != 1 {
			t.Fatalf("Retryable {429}, got 503: RoundTrip = %v, %v after %d attempts; want the 503 after 1", resp, err, len(f.attempts()))
		}
	})
}

func TestAttemptCap(t *testing.T) {
	for _, max := range []int{1, 3} {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(statuses(503))
			resp, err := get(t, New(f, seeded(Config{MaxAttempts: max, Base: time.Millisecond})), "http://api.test/x")
			want := max
			var re *RetryError
			if resp != nil || !errors.As(err, &re) || !errors.Is(err, ErrAttemptsExhausted) {
				t.Fatalf("MaxAttempts %d: RoundTrip = %v, %v; want nil, a *RetryError for ErrAttemptsExhausted", max, resp, err)
			}
			if n := len(f.attempts()); n != want || re.Attempts != want || re.Status != 503 {
				t.Errorf("MaxAttempts %d: %d attempts, error says %d, status %d; want %d, 503", max, n, re.Attempts, re.Status, want)
			}
			for i, b := range f.bodies {
				if !b.closed.Load() {
					t.Errorf("MaxAttempts %d: response %d not closed", max, i+1)
				}
			}
		})
	}
}

func TestRetryAfterWins(t *testing.T) {
	tests := []struct {
		name string
		ra   func(now time.Time) string
		want time.Duration
	}{
		{"delta", func(time.Time) string { return "7" }, 7 * time.Second},
		{"date", func(now time.Time) string { return now.Add(4 * time.Second).UTC().Format(http.TimeFormat) }, 4 * time.Second},
		// A Retry-After that allows an immediate retry sets no wait of
		// its own: the backoff (here at most 1 s, base 1 s) applies.
		{"past date", func(now time.Time) string { return now.Add(-time.Hour).UTC().Format(http.TimeFormat) }, -1},
		{"zero", func(time.Time) string { return "0" }, -1},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			// The bubble starts at a whole second, so HTTP-dates are exact.
			f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
				if n == 0 {
					return reply(429, "Retry-After", tt.ra(time.Now()), "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1"), nil
				}
				return reply(200), nil
			})
			cfg := Config{Base: time.Hour, Cap: time.Hour}
			if tt.want < 0 {
				cfg = Config{Base: time.Second, Cap: time.Second}
			}
			resp, err := get(t, New(f, seeded(cfg)), "http://api.test/x")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: RoundTrip = %v, %v; want 200", tt.name, resp, err)
			}
			a := f.attempts()
			got := a[1].at - a[0].at
			switch {
			case tt.want < 0 && (got <= 0 || got > time.Second):
				t.Errorf("%s: wait = %v; want the backoff's, in (0, 1s]", tt.name, got)
			case tt.want >= 0 && got != tt.want:
				t.Errorf("%s: wait = %v; want exactly %v from Retry-After", tt.name, got, tt.want)
			}
		})
	}
}

func TestUnusableRetryAfterFallsBackToBackoff(t *testing.T) {
	for _, ra := range []string{"-5", "1.5", "garbage", ""} {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
				if n == 0 {
					return reply(503, "Retry-After", ra), nil
				}
				return reply(200), nil
			})
			base := 300 * time.Millisecond
			if _, err := get(t, New(f, seeded(Config{Base: base})), "http://api.test/x"); err != nil {
				t.Fatal(err)
			}
			a := f.attempts()
			if w := a[1].at - a[0].at; w < 0 || w > base {
				t.Errorf("Retry-After %q: wait = %v; want a full-jitter backoff in [0, %v]", ra, w, base)
			}
		})
	}
}

func TestRetryAfterJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
			if n == 0 {
				return reply(429, "Retry-After", "2"), nil
			}
			return reply(200), nil
		})
		if _, err := get(t, New(f, seeded(Config{RetryAfterJitter: time.Second})), "http://api.test/x"); err != nil {
			t.Fatal(err)
		}
		a := f.attempts()
		if w := a[1].at - a[0].at; w < 2*time.Second || w > 3*time.Second {
			t.Errorf("wait = %v; want in [2s, 3s]: Retry-After plus up to RetryAfterJitter", w)
		}
	})
}

func TestBudgetRetryAfterTooLongFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(int, *http.Request) (*http.Response, error) {
			return reply(503, "Retry-After", "3600"), nil
		})
		start := time.Now()
		resp, err := get(t, New(f, Config{Budget: 20 * time.Second}), "http://api.test/x")
		var re *RetryError
		if resp != nil || !errors.Is(err, ErrBudgetExhausted) || !errors.As(err, &re) {
			t.Fatalf("RoundTrip = %v, %v; want nil, ErrBudgetExhausted", resp, err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("call took %v; want 0: a wait past the budget is never started", d)
		}
		if re.Attempts != 1 || re.Status != 503 || re.Wait != time.Hour || re.Elapsed != 0 {
			t.Errorf("RetryError = %+v; want 1 attempt, status 503, wait 1h, elapsed 0", re)
		}
		if !f.bodies[0].closed.Load() {
			t.Error("the refused response was not closed")
		}
		if !strings.Contains(err.Error(), "giving up after 1 attempt in 0s (last status 503): time budget exhausted (next wait 1h0m0s)") {
			t.Errorf("Error() = %q", err)
		}
	})
}

func TestBudgetBoundsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(503))
		budget := 10 * time.Second
		start := time.Now()
		_, err := get(t, New(f, seeded(Config{Base: 2 * time.Second, Cap: time.Minute, MaxAttempts: 100, Budget: budget})), "http://api.test/x")
		if !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("err = %v; want ErrBudgetExhausted", err)
		}
		if d := time.Since(start); d >= budget {
			t.Errorf("call took %v; want < budget %v", d, budget)
		}
		if n := len(f.attempts()); n >= 100 {
			t.Errorf("attempts = %d; want the budget to stop them", n)
		}
	})
}

func TestBudgetCancelsHungAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(_ int, req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
		start := time.Now()
		_, err := get(t, New(f, Config{Budget: 5 * time.Second}), "http://api.test/x")
		if !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("err = %v; want ErrBudgetExhausted", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("call took %v; want exactly the 5s budget", d)
		}
	})
}

func TestAttemptTimeoutRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(n int, req *http.Request) (*http.Response, error) {
			if n == 0 {
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			return reply(200), nil
		})
		resp, err := get(t, New(f, seeded(Config{AttemptTimeout: 2 * time.Second})), "http://api.test/x")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want 200 on the retry", resp, err)
		}
		a := f.attempts()
		if len(a) != 2 || a[1].at < 2*time.Second || a[1].at > 2*time.Second+DefaultBase {
			t.Errorf("attempts at %v; want 2, the second in [2s, 2s+base]", a)
		}
	})
}

func TestContextCancelEndsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(int, *http.Request) (*http.Response, error) {
			return reply(429, "Retry-After", "20"), nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/x", nil)
		start := time.Now()
		go func() {
			time.Sleep(3 * time.Second) // synctest: virtual time
			cancel()
		}()
		_, err := New(f, Config{}).RoundTrip(req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want context.Canceled", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("call took %v; want 3s: the wait ends when the context does", d)
		}
	})
}

func TestContextDeadlineEndsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(_ int, req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/x", nil)
		_, err := New(f, Config{}).RoundTrip(req)
		var re *RetryError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &re) || re.Attempts != 1 {
			t.Fatalf("err = %v; want a 1-attempt RetryError for context.DeadlineExceeded", err)
		}
	})
}

func TestIdempotency(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		header  string // Idempotency-Key value, if any
		add     bool
		want    int // attempts
		wantKey bool
	}{
		{"GET", http.MethodGet, "", false, 3, false},
		{"PUT", http.MethodPut, "", false, 3, false},
		{"DELETE", http.MethodDelete, "", false, 3, false},
		{"POST bare", http.MethodPost, "", false, 1, false},
		{"PATCH bare", http.MethodPatch, "", false, 1, false},
		{"POST keyed", http.MethodPost, "k-1", false, 3, true},
		{"PATCH keyed", http.MethodPatch, "k-2", false, 3, true},
		{"POST add key", http.MethodPost, "", true, 3, true},
		{"POST keyed, add", http.MethodPost, "mine", true, 3, true},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(statuses(503, 503, 201))
			req, _ := http.NewRequest(tt.method, "http://api.test/x", strings.NewReader("payload"))
			if tt.header != "" {
				req.Header.Set("Idempotency-Key", tt.header)
			}
			resp, err := New(f, seeded(Config{AddIdempotencyKey: tt.add})).RoundTrip(req)
			if err != nil {
				t.Fatalf("%s: err = %v", tt.name, err)
			}
			a := f.attempts()
			if len(a) != tt.want {
				t.Fatalf("%s: attempts = %d; want %d", tt.name, len(a), tt.want)
			}
			if tt.want == 1 && resp.StatusCode != 503 {
				t.Errorf("%s: status = %d; want the 503 returned as is", tt.name, resp.StatusCode)
			}
			key := a[0].header.Get("Idempotency-Key")
			if (key != "") != tt.wantKey {
				t.Fatalf("%s: Idempotency-Key = %q; want one: %v", tt.name, key, tt.wantKey)
			}
			if tt.header != "" && key != tt.header {
				t.Errorf("%s: Idempotency-Key = %q; want the caller's %q", tt.name, key, tt.header)
			}
			for i, s := range a {
				if got := s.header.Get("Idempotency-Key"); got != key {
					t.Errorf("%s: attempt %d key %q; want the same %q on every attempt", tt.name, i+1, got, key)
				}
				if s.body != "payload" {
					t.Errorf("%s: attempt %d body %q; want %q replayed", tt.name, i+1, s.body, "payload")
				}
			}
			if tt.add && tt.header == "" && req.Header.Get("Idempotency-Key") != "" {
				t.Errorf("%s: the caller's request was modified", tt.name)
			}
		})
	}
}

func TestFreshKeyPerCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(200))
		tr := New(f, seeded(Config{AddIdempotencyKey: true}))
		for range 2 {
			req, _ := http.NewRequest(http.MethodPost, "http://api.test/x", nil)
			if _, err := tr.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		}
		a := f.attempts()
		k1, k2 := a[0].header.Get("Idempotency-Key"), a[1].header.Get("Idempotency-Key")
		if len(k1) != 32 || k1 == k2 {
			t.Errorf("keys %q, %q; want two different 32-hex-digit keys", k1, k2)
		}
	})
}

func TestBodyNotReplayableNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(503, 200))
		req, _ := http.NewRequest(http.MethodPut, "http://api.test/x", io.NopCloser(bytes.NewReader([]byte("once"))))
		if req.GetBody != nil {
			t.Fatal("test setup: want a body without GetBody")
		}
		resp, err := New(f, Config{}).RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || len(f.attempts()) != 1 {
			t.Fatalf("RoundTrip = %v, %v after %d attempts; want the 503 after 1 attempt", resp, err, len(f.attempts()))
		}
	})
}

func TestGetBodyError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(503, 200))
		req, _ := http.NewRequest(http.MethodPut, "http://api.test/x", strings.NewReader("x"))
		boom := errors.New("boom")
		req.GetBody = func() (io.ReadCloser, error) { return nil, boom }
		_, err := New(f, seeded(Config{})).RoundTrip(req)
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v; want the GetBody error", err)
		}
	})
}

func TestOneLayer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(503))
		inner := New(f, seeded(Config{MaxAttempts: 3, Base: time.Millisecond}))
		outer := New(inner, seeded(Config{MaxAttempts: 4, Base: time.Millisecond}))
		_, err := get(t, outer, "http://api.test/x")
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts != 4 {
			t.Fatalf("err = %v; want the outer layer's RetryError after 4 attempts", err)
		}
		if n := len(f.attempts()); n != 4 {
			t.Errorf("attempts reaching the server = %d; want 4, not 4×3", n)
		}
	})
}

type errNet struct{ timeout bool }

func (e errNet) Error() string   { return "net failure" }
func (e errNet) Timeout() bool   { return e.timeout }
func (e errNet) Temporary() bool { return false }

func TestIsTransient(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.EOF, true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{syscall.EPIPE, true},
		{errNet{timeout: true}, true},
		{errNet{}, true},
		{&net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, false},
		{&net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, true},
		{x509.UnknownAuthorityError{}, false},
		{fmt.Errorf("tls: %w", x509.HostnameError{}), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{errors.New("unsupported protocol scheme"), false},
	}
	for _, tt := range tests {
		if got := IsTransient(tt.err); got != tt.want {
			t.Errorf("IsTransient(%v) = %v; want %v", tt.err, got, tt.want)
		}
	}
}

func TestNetworkErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
			if n < 2 {
				return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
			}
			return reply(200), nil
		})
		resp, err := get(t, New(f, seeded(Config{})), "http://api.test/x")
		if err != nil || resp.StatusCode != 200 || len(f.attempts()) != 3 {
			t.Fatalf("RoundTrip = %v, %v after %d attempts; want 200 after 3", resp, err, len(f.attempts()))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		permanent := x509.UnknownAuthorityError{}
		f := newFake(func(int, *http.Request) (*http.Response, error) { return nil, permanent })
		_, err := get(t, New(f, Config{}), "http://api.test/x")
		var re *RetryError
		if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != nil || len(f.attempts()) != 1 {
			t.Fatalf("err = %v after %d attempts; want a 1-attempt RetryError with no Reason", err, len(f.attempts()))
		}
		var ua x509.UnknownAuthorityError
		if !errors.As(err, &ua) {
			t.Errorf("errors.As(err, x509.UnknownAuthorityError) = false; want the cause wrapped")
		}
	})
}

// TestPacingSeedExample is the seeds' example: at 10 req/s with burst 5, the
// first 5 permits flow at once and the 6th waits ~100 ms.
func TestPacingSeedExample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(200))
		tr := New(f, Config{Rate: 10, Burst: 5})
		for range 7 {
			resp, err := get(t, tr, "http://api.test/x")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		a := f.attempts()
		want := []time.Duration{0, 0, 0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond}
		for i, s := range a {
			if s.at != want[i] {
				t.Errorf("permit %d at %v; want %v", i+1, s.at, want[i])
			}
		}
	})
}

func TestPacingPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(200))
		tr := New(f, Config{Rate: 1, Burst: 1})
		for _, u := range []string{"http://a.test/", "http://b.test/", "http://a.test/"} {
			if _, err := get(t, tr, u); err != nil {
				t.Fatal(err)
			}
		}
		a := f.attempts()
		if a[0].at != 0 || a[1].at != 0 || a[2].at != time.Second {
			t.Errorf("attempts at %v, %v, %v; want 0, 0 (other host), 1s", a[0].at, a[1].at, a[2].at)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(200))
		tr := New(f, Config{Rate: 1, Burst: 1, Key: func(*http.Request) string { return "one" }})
		for _, u := range []string{"http://a.test/", "http://b.test/"} {
			if _, err := get(t, tr, u); err != nil {
				t.Fatal(err)
			}
		}
		if a := f.attempts(); a[1].at != time.Second {
			t.Errorf("second host at %v; want 1s: one custom key, one bucket", a[1].at)
		}
	})
}

func TestPacingQuotaDefaultRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(200))
		tr := New(f, Config{Quota: 10}) // 8 req/s, burst 1
		for range 3 {
			get(t, tr, "http://api.test/x")
		}
		a := f.attempts()
		if a[1].at != 125*time.Millisecond || a[2].at != 250*time.Millisecond {
			t.Errorf("attempts at %v, %v; want 125ms, 250ms (80%% of 10 req/s)", a[1].at, a[2].at)
		}
	})
}

func TestPacingBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(200))
		tr := New(f, Config{Rate: 0.1, Burst: 1, Budget: 5 * time.Second})
		get(t, tr, "http://api.test/x")
		start := time.Now()
		_, err := get(t, tr, "http://api.test/x")
		var re *RetryError
		if !errors.Is(err, ErrBudgetExhausted) || !errors.As(err, &re) || re.Attempts != 0 || re.Wait != 10*time.Second {
			t.Fatalf("err = %v; want ErrBudgetExhausted after 0 attempts, refusing a 10s wait", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("refused call took %v; want 0", d)
		}
		// The refused reservation was given back: the next permit is at 10s.
		time.Sleep(10 * time.Second) // synctest: virtual time
		if _, err := get(t, tr, "http://api.test/x"); err != nil {
			t.Errorf("after 10s: err = %v; want a permit", err)
		}
	})
}

func TestProactiveSlowDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Limit 100, 4 left (< 10%), reset in 10s: spread 4 requests over 10s.
		f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
			if n == 0 {
				return reply(200, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "4", "X-RateLimit-Reset", "10"), nil
			}
			return reply(200), nil
		})
		tr := New(f, Config{})
		for range 7 {
			if _, err := get(t, tr, "http://api.test/x"); err != nil {
				t.Fatal(err)
			}
		}
		a := f.attempts()
		want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
		for i, s := range a {
			if s.at != want[i] {
				t.Errorf("request %d at %v; want %v", i+1, s.at, want[i])
			}
		}
		// Another key is not slowed.
		start := time.Now()
		get(t, tr, "http://other.test/")
		if d := time.Since(start); d != 0 {
			t.Errorf("other key waited %v; want 0", d)
		}
	})
}

func TestNoSlowDownAboveThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
			return reply(200, "RateLimit", `"q";r=10;t=10`, "RateLimit-Policy", `"q";q=100;w=60`), nil
		})
		tr := New(f, Config{})
		for range 5 {
			get(t, tr, "http://api.test/x")
		}
		if a := f.attempts(); a[4].at != 0 {
			t.Errorf("5th request at %v; want 0: 10%% left is not below 10%%", a[4].at)
		}
	})
}

func TestSlowDownZeroRemainingWaitsForReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
			if n == 0 {
				return reply(200, "RateLimit", `"q";r=0;t=3`), nil
			}
			return reply(200), nil
		})
		tr := New(f, Config{})
		get(t, tr, "http://api.test/x")
		get(t, tr, "http://api.test/x")
		if a := f.attempts(); a[1].at != 3*time.Second {
			t.Errorf("request after r=0 at %v; want 3s, the reset", a[1].at)
		}
	})
}

// recorder counts Observer events.
type recorder struct {
	mu                                       sync.Mutex
	attempts, retries, giveUps, paced, th429 int
	waits                                    []time.Duration
	sources                                  []WaitSource
	reasons                                  []string
	giveUp                                   []error
}

func (r *recorder) Attempt(AttemptEvent) { r.mu.Lock(); r.attempts++; r.mu.Unlock() }
func (r *recorder) Retry(e RetryEvent) {
	r.mu.Lock()
	r.retries++
	r.waits = append(r.waits, e.Wait)
	r.sources = append(r.sources, e.Source)
	r.reasons = append(r.reasons, e.Reason)
	r.mu.Unlock()
}
func (r *recorder) GiveUp(e GiveUpEvent) {
	r.mu.Lock()
	r.giveUps++
	r.giveUp = append(r.giveUp, e.Err.Reason)
	r.mu.Unlock()
}
func (r *recorder) PacingWait(PacingEvent)   { r.mu.Lock(); r.paced++; r.mu.Unlock() }
func (r *recorder) Throttled(ThrottledEvent) { r.mu.Lock(); r.th429++; r.mu.Unlock() }

func TestObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
			switch n {
			case 0:
				return reply(429, "Retry-After", "1"), nil
			case 1:
				return nil, io.ErrUnexpectedEOF
			}
			return reply(503), nil
		})
		rec := &recorder{}
		tr := New(f, seeded(Config{Observer: rec, MaxAttempts: 3, Rate: 100, Burst: 1}))
		_, err := get(t, tr, "http://api.test/x")
		if !errors.Is(err, ErrAttemptsExhausted) {
			t.Fatalf("err = %v", err)
		}
		if rec.attempts != 3 || rec.retries != 2 || rec.giveUps != 1 || rec.th429 != 1 {
			t.Errorf("events: %d attempts, %d retries, %d give-ups, %d 429s; want 3, 2, 1, 1", rec.attempts, rec.retries, rec.giveUps, rec.th429)
		}
		if rec.sources[0] != SourceRetryAfter || rec.waits[0] != time.Second || rec.sources[1] != SourceBackoff {
			t.Errorf("retry sources %v waits %v; want retry-after 1s, then backoff", rec.sources, rec.waits)
		}
		if rec.reasons[0] != "429" || rec.reasons[1] != "network" {
			t.Errorf("retry reasons %v; want 429, network", rec.reasons)
		}
		if rec.giveUp[0] != ErrAttemptsExhausted {
			t.Errorf("give-up reason %v; want ErrAttemptsExhausted", rec.giveUp[0])
		}
	})
}

func TestReplayWithSeed(t *testing.T) {
	run := func() []time.Duration {
		var out []time.Duration
		synctest.Test(t, func(t *testing.T) {
			f := newFake(statuses(503))
			get(t, New(f, Config{Rand: rand.New(rand.NewPCG(5, 6))}), "http://api.test/x")
			for _, s := range f.attempts() {
				out = append(out, s.at)
			}
		})
		return out
	}
	a, b := run(), run()
	if fmt.Sprint(a) != fmt.Sprint(b) || len(a) < 2 {
		t.Errorf("attempt times %v then %v; want the same retries with the same seed", a, b)
	}
}

func TestConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
			if n%3 == 0 {
				return reply(503, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "50"), nil
			}
			return reply(200), nil
		})
		tr := New(f, Config{Rate: 50, Burst: 10, AddIdempotencyKey: true})
		var wg sync.WaitGroup
		var fails atomic.Int64
		for i := range 40 {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://h%d.test/", i%4), strings.NewReader("b"))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					fails.Add(1)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		if fails.Load() != 0 {
			t.Errorf("%d calls failed; want 0", fails.Load())
		}
	})
}

func TestEffectiveDefaults(t *testing.T) {
	e := Config{}.Effective()
	if e.Base != DefaultBase || e.Cap != DefaultCap || e.MaxAttempts != AttemptsFor(DefaultBase, DefaultCap, DefaultBudget, JitterFull) || e.Budget != DefaultBudget ||
		e.Jitter != JitterFull || fmt.Sprint(e.Retryable) != "[429 500 502 503 504]" || e.Rate != 0 || e.Burst != 0 ||
		e.Key == nil || e.Observer == nil || e.RetryError == nil {
		t.Errorf("Config{}.Effective() = %+v; want the documented defaults", e)
	}
	e = Config{Base: time.Second, Cap: time.Millisecond, Quota: 50, Jitter: Jitter(42), MaxAttempts: -1, Budget: -1}.Effective()
	if e.Cap != time.Second || e.Rate != 40 || e.Burst != DefaultBurst || e.Jitter != JitterFull || e.MaxAttempts != AttemptsFor(time.Second, time.Second, DefaultBudget, JitterFull) || e.Budget != DefaultBudget {
		t.Errorf("Effective() = cap %v rate %v burst %d jitter %v attempts %d budget %v; want 1s, 40, %d, full, derived, %v",
			e.Cap, e.Rate, e.Burst, e.Jitter, e.MaxAttempts, e.Budget, DefaultBurst, DefaultBudget)
	}
}

func TestSummary(t *testing.T) {
	s := Config{Rate: 8, Burst: 5, Quota: 10, Jitter: JitterEqual, Base: 100 * time.Millisecond, Cap: 5 * time.Second,
		MaxAttempts: 4, Budget: 20 * time.Second}.Summary()
	for _, want := range []string{
		"retryable: 429, 500, 502, 503, 504, and transient network errors",
		"backoff: equal jitter, base 100ms, cap 5s",
		"attempts: at most 4",
		"budget: 20s per call",
		"token bucket 8 req/s, burst 5, per quota key (80% of the published 10 req/s)",
		"per-process (not shared across a fleet), keyed by request host",
		"metrics: none",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("Summary() lacks %q:\n%s", want, s)
		}
	}
	if s := (Config{}).Summary(); !strings.Contains(s, "full jitter, base 200ms, cap 30s") || !strings.Contains(s, "no token bucket") {
		t.Errorf("Config{}.Summary() =\n%s; want the defaults stated", s)
	}
}

func TestNilNextIsDefaultTransport(t *testing.T) {
	if tr := New(nil, Config{}); tr.next != http.DefaultTransport {
		t.Errorf("New(nil, ...).next = %v; want http.DefaultTransport", tr.next)
	}
}

func TestAttemptTimeoutExhaustsAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(_ int, req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
		_, err := get(t, New(f, seeded(Config{AttemptTimeout: time.Second, MaxAttempts: 3, Base: time.Millisecond})), "http://api.test/x")
		if !errors.Is(err, ErrAttemptTimeout) || !errors.Is(err, ErrAttemptsExhausted) || errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want ErrAttemptTimeout and ErrAttemptsExhausted, not context.Canceled", err)
		}
		if n := len(f.attempts()); n != 3 {
			t.Errorf("attempts = %d; want 3", n)
		}
	})
}

func TestBudgetCancelIsNotCallerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(_ int, req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			return nil, req.Context().Err()
		})
		_, err := get(t, New(f, Config{Budget: time.Second}), "http://api.test/x")
		if !errors.Is(err, ErrBudgetExhausted) || errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want ErrBudgetExhausted, not context.Canceled", err)
		}
	})
}

func TestHugeResetFailsFastOnBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
			return reply(200, "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999999"), nil
		})
		tr := New(f, Config{Budget: 10 * time.Second})
		get(t, tr, "http://api.test/x")
		start := time.Now()
		_, err := get(t, tr, "http://api.test/x")
		if !errors.Is(err, ErrBudgetExhausted) || time.Since(start) != 0 {
			t.Fatalf("err = %v after %v; want ErrBudgetExhausted at once", err, time.Since(start))
		}
	})
}

func TestOtherKeySpellingsDoNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(503, 200))
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/x", nil)
		req.Header.Set("X-Idempotency-Key", "k")
		resp, err := New(f, Config{}).RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || len(f.attempts()) != 1 {
			t.Fatalf("RoundTrip = %v, %v after %d attempts; want the 503 after 1", resp, err, len(f.attempts()))
		}
	})
}

// sharedLimiter is a toy shared quota: one permit per interval for all
// Transports using it.
type sharedLimiter struct {
	mu       sync.Mutex
	next     time.Time
	interval time.Duration
	canceled int
}

func (l *sharedLimiter) Reserve(_ context.Context, key string, now time.Time) (time.Duration, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slot := l.next
	if slot.Before(now) {
		slot = now
	}
	l.next = slot.Add(l.interval)
	return slot.Sub(now), func() { l.mu.Lock(); l.canceled++; l.mu.Unlock() }, nil
}

func TestSharedLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := &sharedLimiter{interval: time.Second}
		f := newFake(statuses(200))
		a, b := New(f, Config{Limiter: lim, Rate: 1000}), New(f, Config{Limiter: lim, Budget: 2500 * time.Millisecond})
		get(t, a, "http://api.test/x")
		get(t, b, "http://api.test/x")
		get(t, a, "http://api.test/x")
		at := f.attempts()
		if at[1].at != time.Second || at[2].at != 2*time.Second {
			t.Errorf("attempts at %v, %v; want 1s, 2s: two Transports share one quota", at[1].at, at[2].at)
		}
		// The next permit is 1s away; b's budget is 2.5s, so 3 more s is refused.
		lim.next = time.Now().Add(3 * time.Second)
		if _, err := get(t, b, "http://api.test/x"); !errors.Is(err, ErrBudgetExhausted) || lim.canceled != 1 {
			t.Errorf("err = %v, %d permits given back; want ErrBudgetExhausted and 1", err, lim.canceled)
		}
		if s := (Config{Limiter: lim}).Summary(); !strings.Contains(s, "shared through a custom Limiter") {
			t.Errorf("Summary() does not state the shared bucket:\n%s", s)
		}
	})
}

// TestRateLimited403 follows GitHub's secondary rate limits: a 403 that
// says it is a rate limit is retried after the wait it names; a plain 403,
// or one whose only signal is unusable, fails at once.
func TestRateLimited403(t *testing.T) {
	tests := []struct {
		name string
		hdr  func(now time.Time) []string
		want time.Duration // -1: not retried
	}{
		{"Retry-After seconds", func(time.Time) []string { return []string{"Retry-After", "3"} }, 3 * time.Second},
		{"Retry-After date", func(now time.Time) []string {
			return []string{"Retry-After", now.Add(5 * time.Second).UTC().Format(http.TimeFormat)}
		}, 5 * time.Second},
		// The bubble's clock is in 2000, before epoch second 10^9: an
		// epoch reset must still read as one.
		{"X-RateLimit exhausted, epoch reset", func(now time.Time) []string {
			return []string{"X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(now.Add(4*time.Second).Unix(), 10)}
		}, 4 * time.Second},
		{"X-RateLimit exhausted, reset in seconds", func(time.Time) []string {
			return []string{"X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "4"}
		}, 4 * time.Second},
		{"IETF RateLimit exhausted", func(time.Time) []string {
			return []string{"RateLimit-Policy", `"minute";q=60;w=60`, "RateLimit", `"minute";r=0;t=6`}
		}, 6 * time.Second},
		{"plain", func(time.Time) []string { return nil }, -1},
		{"remaining left", func(time.Time) []string {
			return []string{"X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "4"}
		}, -1},
		{"garbage Retry-After", func(time.Time) []string { return []string{"Retry-After", "soon, maybe"} }, -1},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
				if n == 0 {
					return reply(403, tt.hdr(time.Now())...), nil
				}
				return reply(200), nil
			})
			resp, err := get(t, New(f, seeded(Config{Base: time.Hour, Cap: time.Hour})), "http://api.test/x")
			if err != nil {
				t.Fatalf("%s: RoundTrip error %v", tt.name, err)
			}
			resp.Body.Close()
			a := f.attempts()
			switch {
			case tt.want < 0 && (len(a) != 1 || resp.StatusCode != 403):
				t.Errorf("%s: %d attempts, final %d; want the 403 at once", tt.name, len(a), resp.StatusCode)
			case tt.want >= 0 && len(a) != 2:
				t.Errorf("%s: %d attempts; want a retry", tt.name, len(a))
			case tt.want >= 0 && a[1].at-a[0].at != tt.want:
				t.Errorf("%s: waited %v; want %v", tt.name, a[1].at-a[0].at, tt.want)
			}
		})
	}
}

// TestDrain: Drain reads up to DrainLimit bytes and closes the body; a nil
// response or body is left alone.
func TestDrain(t *testing.T) {
	b := &trackedBody{r: strings.NewReader(strings.Repeat("x", DrainLimit+100))}
	Drain(&http.Response{Body: b})
	if !b.closed.Load() || b.read.Load() != DrainLimit {
		t.Errorf("Drain: closed %v, read %d; want closed, %d read", b.closed.Load(), b.read.Load(), DrainLimit)
	}
	Drain(nil)
	Drain(&http.Response{})
}

// TestClaimWaits: with ClaimWaits each retry carries the wait the client
// meant after the previous answer (a backoff draw, a Retry-After), in
// milliseconds; in virtual time that is the gap itself. A first attempt,
// and any attempt without ClaimWaits, carries none.
func TestClaimWaits(t *testing.T) {
	for _, on := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			f := newFake(func(n int, _ *http.Request) (*http.Response, error) {
				switch n {
				case 0, 1:
					return reply(503), nil
				case 2:
					return reply(429, "Retry-After", "2"), nil
				}
				return reply(200), nil
			})
			resp, err := get(t, New(f, seeded(Config{Base: 100 * time.Millisecond, ClaimWaits: on})), "http://api.test/x")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			a := f.attempts()
			if len(a) != 4 {
				t.Fatalf("%d attempts; want 4", len(a))
			}
			for i, s := range a {
				v := s.header.Get(waitHeader)
				if i == 0 || !on {
					if v != "" {
						t.Errorf("on=%v attempt %d: %s %q; want none", on, i+1, waitHeader, v)
					}
					continue
				}
				ms, err := strconv.ParseFloat(v, 64)
				gap := s.at - a[i-1].at
				if err != nil || time.Duration(ms*float64(time.Millisecond)+0.5) != gap {
					t.Errorf("attempt %d: %s %q (%v); want the gap %v", i+1, waitHeader, v, err, gap)
				}
			}
		})
	}
}

func TestFormatClaim(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0", -time.Second: "0", 125 * time.Millisecond: "125",
		12500 * time.Microsecond: "12.5", time.Nanosecond: "0.000001", 2*time.Second + 10*time.Microsecond: "2000.01"} {
		if got := formatClaim(d); got != want {
			t.Errorf("formatClaim(%v) = %q; want %q", d, got, want)
		}
	}
}
