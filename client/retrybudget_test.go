package client

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// byPath answers by the request's path: "/ok" 200, "/404" 404, "/fail"
// 503 always, "/fail-N" 503 for the first N attempts of the path then 200,
// "/hang-N" hangs (until the attempt's context ends) for the first N
// attempts then 200, "/neterr-timeout" and "/neterr" a net.Error that is,
// or is not, a timeout.
type byPath struct {
	mu   sync.Mutex
	seen map[string]int
	sent atomic.Int64
}

func (b *byPath) RoundTrip(req *http.Request) (*http.Response, error) {
	b.sent.Add(1)
	p := req.URL.Path
	b.mu.Lock()
	if b.seen == nil {
		b.seen = map[string]int{}
	}
	b.seen[p]++
	n := b.seen[p]
	b.mu.Unlock()
	var first int
	switch {
	case p == "/ok":
		return reply(200), nil
	case p == "/404":
		return reply(404), nil
	case p == "/fail":
		return reply(503), nil
	case p == "/neterr-timeout":
		return nil, errNet{timeout: true}
	case p == "/neterr":
		return nil, errNet{}
	case sscan(p, "/fail-%d", &first):
		if n <= first {
			return reply(503), nil
		}
		return reply(200), nil
	case sscan(p, "/hang-%d", &first):
		if n <= first {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		return reply(200), nil
	}
	return reply(500), nil
}

func sscan(s, format string, v *int) bool {
	_, err := fmt.Sscanf(s, format, v)
	return err == nil
}

// budgetRec records retry-budget events and give-ups.
type budgetRec struct {
	NopObserver
	mu      sync.Mutex
	events  []RetryBudgetEvent
	reasons []error
}

func (r *budgetRec) RetryBudget(e RetryBudgetEvent) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *budgetRec) GiveUp(e GiveUpEvent) {
	r.mu.Lock()
	r.reasons = append(r.reasons, e.Err.Reason)
	r.mu.Unlock()
}

func (r *budgetRec) take() []RetryBudgetEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// call makes one GET of path through rt and closes what it returns.
func call(t *testing.T, rt http.RoundTripper, path string) error {
	t.Helper()
	resp, err := get(t, rt, "http://api.test"+path)
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return err
}

func TestRetryBudgetEffective(t *testing.T) {
	tests := []struct {
		in, want RetryBudget
	}{
		{RetryBudget{}, RetryBudget{500, 5, 10, 1}},
		{RetryBudget{Capacity: 50, RetryCost: 7}, RetryBudget{50, 7, 14, 1}},
		{RetryBudget{RetryCost: -3, TimeoutCost: -1, Refund: -2}, RetryBudget{500, 5, 10, 1}},
		{RetryBudget{Capacity: 20, RetryCost: 2, TimeoutCost: 3, Refund: 4}, RetryBudget{20, 2, 3, 4}},
		{NoRetryBudget, NoRetryBudget},
		{RetryBudget{Capacity: -7, RetryCost: 3}, NoRetryBudget},
	}
	for _, tt := range tests {
		got := Config{RetryBudget: tt.in}.Effective().RetryBudget
		if got != tt.want {
			t.Errorf("Effective().RetryBudget of %+v = %+v; want %+v", tt.in, got, tt.want)
		}
		if got.Off() != (tt.want.Capacity < 0) {
			t.Errorf("%+v.Off() = %v", got, got.Off())
		}
	}
	if e := (Config{}).Effective().RetryBudget; e.Capacity != DefaultRetryBudgetCapacity || e.RetryCost != DefaultRetryBudgetCost ||
		e.TimeoutCost != DefaultRetryBudgetTimeoutCost || e.Refund != DefaultRetryBudgetRefund || e.Off() {
		t.Errorf("zero Config's retry budget = %+v; want the Default constants, on", e)
	}
	if got := New(nil, Config{}).RetryBudgetTokens(); got != DefaultRetryBudgetCapacity {
		t.Errorf("a new Transport's tokens = %d; want %d (starts full)", got, DefaultRetryBudgetCapacity)
	}
	if got := New(nil, Config{RetryBudget: NoRetryBudget}).RetryBudgetTokens(); got != -1 {
		t.Errorf("tokens without a retry budget = %d; want -1", got)
	}
}

// TestRetryBudgetRule walks one Transport's bucket through every clause of
// the rule: costs, refusal, refunds of a retry's cost and of a
// first-attempt success, the capacity cap, and the calls that give nothing
// back.
func TestRetryBudgetRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &byPath{}
		tr := New(srv, seeded(Config{Base: time.Millisecond, Cap: time.Millisecond, AttemptTimeout: time.Second,
			RetryBudget: RetryBudget{Capacity: 12, RetryCost: 5, TimeoutCost: 10, Refund: 1}}))
		level := func(step string, want int) {
			t.Helper()
			if got := tr.RetryBudgetTokens(); got != want {
				t.Fatalf("after %s: tokens = %d; want %d", step, got, want)
			}
		}
		level("New", 12)
		if err := call(t, tr, "/fail-2"); err != nil {
			t.Fatal(err)
		}
		// Two retries took 5 each (12 → 2); the second got the 200 and
		// gives its 5 back; the first's are lost.
		level("two retries, then a success", 7)

		start := time.Now()
		srv.sent.Store(0)
		err := call(t, tr, "/fail")
		var re *RetryError
		if !errors.Is(err, ErrRetryBudgetExhausted) || !errors.As(err, &re) {
			t.Fatalf("always-503 call = %v; want ErrRetryBudgetExhausted in a *RetryError", err)
		}
		if re.Attempts != 2 || re.Status != 503 || re.Wait != 0 || srv.sent.Load() != 2 {
			t.Errorf("RetryError = %+v, sent %d; want 2 attempts, status 503, no wait", re, srv.sent.Load())
		}
		if d := time.Since(start); d > 2*time.Millisecond {
			t.Errorf("the refused call took %v; want no wait after its refused retry (one backoff ≤ 1ms before)", d)
		}
		if !strings.Contains(err.Error(), "giving up after 2 attempts") || !strings.Contains(err.Error(), "retry budget exhausted: too many retries across calls") {
			t.Errorf("Error() = %q", err)
		}
		level("a retry (7 → 2) and a refused one", 2)

		for range 3 {
			if err := call(t, tr, "/ok"); err != nil {
				t.Fatal(err)
			}
		}
		level("three first-attempt successes", 5)

		// A retry after a timed-out attempt costs 10: refused at 5.
		err = call(t, tr, "/hang-1")
		if !errors.Is(err, ErrRetryBudgetExhausted) || !errors.Is(err, ErrAttemptTimeout) {
			t.Fatalf("call after a timeout = %v; want ErrRetryBudgetExhausted with the attempt's ErrAttemptTimeout", err)
		}
		level("a refused retry after a timeout", 5)

		if err := call(t, tr, "/fail-1"); err != nil {
			t.Fatal(err)
		}
		level("a retry down to 0, then its success gives its 5 back", 5)

		if err := call(t, tr, "/404"); err != nil {
			t.Fatal(err)
		}
		level("a non-retryable status at the first attempt (refunded as an answer)", 6)

		if err := call(t, tr, "/neterr"); err == nil {
			t.Fatal("always-failing network call succeeded")
		}
		level("a non-timeout network error: one retry of 5, then refused", 1)

		// A POST without an Idempotency-Key is not replayable: its 503 is
		// returned as it is, and gives nothing back.
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/fail", strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 503 {
			t.Fatalf("unreplayable POST = %v, %v; want its 503", resp, err)
		}
		resp.Body.Close()
		level("a 503 returned unretried", 1)

		for range 20 {
			if err := call(t, tr, "/ok"); err != nil {
				t.Fatal(err)
			}
		}
		level("twenty first-attempt successes (capped)", 12)
	})
}

func TestRetryBudgetNetTimeoutCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(&byPath{}, seeded(Config{Base: time.Millisecond, Cap: time.Millisecond, MaxAttempts: 3,
			RetryBudget: RetryBudget{Capacity: 100, RetryCost: 3, TimeoutCost: 11}}))
		call(t, tr, "/neterr-timeout") // two retries at 11
		if got := tr.RetryBudgetTokens(); got != 78 {
			t.Errorf("after two retries of a net.Error timeout: tokens = %d; want 78 (11 each)", got)
		}
		call(t, tr, "/neterr") // two retries at 3
		if got := tr.RetryBudgetTokens(); got != 72 {
			t.Errorf("after two retries of another net.Error: tokens = %d; want 72 (3 each)", got)
		}
	})
}

// TestRetryBudgetZeroConfig: the zero Config's budget lets 100 retries of
// a server that fails everything through, over as many calls as they
// take, then refuses the next one; the calls' own bounds still apply.
func TestRetryBudgetZeroConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &byPath{}
		tr := New(srv, seeded(Config{}))
		calls, attempts := 0, 0
		var last error
		for calls < 50 {
			calls++
			srv.sent.Store(0)
			last = call(t, tr, "/fail")
			attempts += int(srv.sent.Load())
			if errors.Is(last, ErrRetryBudgetExhausted) {
				break
			}
			if !errors.Is(last, ErrBudgetExhausted) && !errors.Is(last, ErrAttemptsExhausted) {
				t.Fatalf("call %d = %v; want the call's own bounds to end it", calls, last)
			}
		}
		if !errors.Is(last, ErrRetryBudgetExhausted) {
			t.Fatalf("%d calls and %d attempts against an always-503 server; the retry budget never refused", calls, attempts)
		}
		if retries := attempts - calls; retries != DefaultRetryBudgetCapacity/DefaultRetryBudgetCost {
			t.Errorf("retries before the refusal = %d (%d attempts in %d calls); want %d", retries, attempts, calls,
				DefaultRetryBudgetCapacity/DefaultRetryBudgetCost)
		}
		// Empty now: a call whose first attempt fails is not retried at all.
		srv.sent.Store(0)
		if err := call(t, tr, "/fail"); !errors.Is(err, ErrRetryBudgetExhausted) || srv.sent.Load() != 1 {
			t.Errorf("with the budget empty: %v after %d attempts; want ErrRetryBudgetExhausted after 1", err, srv.sent.Load())
		}
		// Five first-attempt successes pay for one retry.
		for range 5 {
			call(t, tr, "/ok")
		}
		srv.sent.Store(0)
		if err := call(t, tr, "/fail-1"); err != nil || srv.sent.Load() != 2 {
			t.Errorf("after 5 successes: %v after %d attempts; want one retry, then 200", err, srv.sent.Load())
		}
	})
}

func TestRetryBudgetOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &byPath{}
		rec := &budgetRec{}
		tr := New(srv, seeded(Config{RetryBudget: NoRetryBudget, MaxAttempts: 10, Base: time.Millisecond, Cap: time.Millisecond, Observer: rec}))
		for i := range 30 {
			srv.sent.Store(0)
			if err := call(t, tr, "/fail"); !errors.Is(err, ErrAttemptsExhausted) || srv.sent.Load() != 10 {
				t.Fatalf("call %d without a retry budget = %v after %d attempts; want all 10 attempts, ErrAttemptsExhausted", i, err, srv.sent.Load())
			}
		}
		if ev := rec.take(); len(ev) != 0 || tr.RetryBudgetTokens() != -1 {
			t.Errorf("without a retry budget: %d budget events, tokens %d; want none, -1", len(ev), tr.RetryBudgetTokens())
		}
		if s := (Config{RetryBudget: NoRetryBudget}).Summary(); !strings.Contains(s, "retry budget: none (NoRetryBudget)") {
			t.Errorf("Summary without a retry budget:\n%s", s)
		}
	})
}

// TestRetryBudgetSharedAcrossKeys: one bucket per Transport, whatever the
// quota key.
func TestRetryBudgetSharedAcrossKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(&byPath{}, seeded(Config{MaxAttempts: 2, RetryBudget: RetryBudget{Capacity: 10}}))
		for _, host := range []string{"a.test", "b.test"} {
			resp, err := get(t, tr, "http://"+host+"/fail")
			if resp != nil || !errors.Is(err, ErrAttemptsExhausted) {
				t.Fatalf("%s: %v; want one retry, then ErrAttemptsExhausted", host, err)
			}
		}
		if _, err := get(t, tr, "http://c.test/fail"); !errors.Is(err, ErrRetryBudgetExhausted) {
			t.Errorf("third host: %v; want ErrRetryBudgetExhausted (the first two keys spent the Transport's 10 tokens)", err)
		}
	})
}

func TestRetryBudgetObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &budgetRec{}
		tr := New(&byPath{}, seeded(Config{Base: time.Millisecond, Cap: time.Millisecond, Observer: rec,
			RetryBudget: RetryBudget{Capacity: 8, RetryCost: 5, Refund: 2}}))
		call(t, tr, "/ok")
		if ev := rec.take(); len(ev) != 0 {
			t.Errorf("first-attempt success with the bucket full: events %+v; want none", ev)
		}
		call(t, tr, "/fail")
		want := []RetryBudgetEvent{
			{Attempt: 1, Delta: -5, Cost: 5, Tokens: 3, Capacity: 8},
			{Attempt: 2, Cost: 5, Tokens: 3, Capacity: 8, Refused: true},
		}
		ev := rec.take()
		if len(ev) != len(want) {
			t.Fatalf("events %+v; want %+v", ev, want)
		}
		for i := range want {
			if ev[i].Request == nil || ev[i].Key != "api.test" {
				t.Errorf("event %d: request %v, key %q; want the call's request and key api.test", i, ev[i].Request, ev[i].Key)
			}
			ev[i].Request, ev[i].Key = nil, ""
			if ev[i] != want[i] {
				t.Errorf("event %d = %+v; want %+v", i, ev[i], want[i])
			}
		}
		if len(rec.reasons) != 1 || rec.reasons[0] != ErrRetryBudgetExhausted {
			t.Errorf("give-up reasons %v; want [ErrRetryBudgetExhausted]", rec.reasons)
		}
		call(t, tr, "/ok")
		call(t, tr, "/ok")
		call(t, tr, "/ok")
		got := rec.take()
		wantUp := []struct{ delta, tokens int }{{2, 5}, {2, 7}, {1, 8}}
		if len(got) != len(wantUp) {
			t.Fatalf("refund events %+v; want %v (none once full)", got, wantUp)
		}
		for i, w := range wantUp {
			if got[i].Delta != w.delta || got[i].Tokens != w.tokens || got[i].Refused || got[i].Cost != 0 || got[i].Attempt != 1 {
				t.Errorf("refund event %d = %+v; want delta %d, tokens %d, attempt 1", i, got[i], w.delta, w.tokens)
			}
		}
	})
}

// TestRetryBudgetConcurrent: many goroutines on one Transport against a
// server that fails at random; the level stays within [0, capacity] and
// is what the events add up to. Run it with -race.
func TestRetryBudgetConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &budgetRec{}
		var mu sync.Mutex
		rnd := rand.New(rand.NewPCG(3, 4))
		next := rtFunc(func(*http.Request) (*http.Response, error) {
			mu.Lock()
			fail := rnd.IntN(3) == 0
			mu.Unlock()
			if fail {
				return reply(503), nil
			}
			return reply(200), nil
		})
		const capacity = 60
		tr := New(next, seeded(Config{Base: time.Millisecond, Cap: 10 * time.Millisecond, Observer: rec,
			RetryBudget: RetryBudget{Capacity: capacity}}))
		var wg sync.WaitGroup
		var refused atomic.Int64
		for range 16 {
			wg.Go(func() {
				for range 50 {
					if err := call(t, tr, "/x"); errors.Is(err, ErrRetryBudgetExhausted) {
						refused.Add(1)
					}
				}
			})
		}
		wg.Wait()
		sum, nRefused := capacity, 0
		for _, e := range rec.take() {
			sum += e.Delta
			if e.Tokens < 0 || e.Tokens > capacity {
				t.Errorf("event level %d outside [0, %d]", e.Tokens, capacity)
			}
			if e.Refused {
				nRefused++
			}
		}
		if got := tr.RetryBudgetTokens(); got != sum || got < 0 || got > capacity {
			t.Errorf("final tokens %d; the events add up to %d (within [0, %d])", got, sum, capacity)
		}
		if refused.Load() == 0 {
			t.Error("no call was refused: the test does not contend for an empty bucket")
		}
		if int64(nRefused) != refused.Load() {
			t.Errorf("%d refusal events, %d calls failed with ErrRetryBudgetExhausted; want equal", nRefused, refused.Load())
		}
	})
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRetryBudgetSummary(t *testing.T) {
	s := Config{}.Summary()
	for _, want := range []string{
		"retry budget: 500 tokens per Transport, shared by all its calls and quota keys, starting full",
		"a retry takes 5 (10 after a timeout)",
		"ErrRetryBudgetExhausted",
		"or 1 after a first-attempt success, up to 500",
		"from full, 100 retries (50 after timeouts), then about one failing retry per 5 first-attempt successes",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("Config{}.Summary() lacks %q:\n%s", want, s)
		}
	}
	s = Config{RetryBudget: RetryBudget{Capacity: 3, RetryCost: 4}}.Summary()
	if !strings.Contains(s, "retry budget: 3 tokens") || !strings.Contains(s, "every retry is refused") {
		t.Errorf("Summary of a budget below a retry's cost:\n%s", s)
	}
}
