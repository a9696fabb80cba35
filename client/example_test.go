package client_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/client"
)

// A Transport drops into any http.Client. Here the server is briefly
// unavailable and says when to come back.
func ExampleNew() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.Header().Set("Retry-After", "0") // come back now
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	hc := &http.Client{Transport: client.New(nil, client.Config{
		Rand: rand.New(rand.NewPCG(1, 2)), // seeded jitter: runs replay
	})}
	resp, err := hc.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status, "after", n.Load(), "attempts")
	// Output: 200 OK after 3 attempts
}

// A Retry-After beyond the budget fails at once instead of hanging the
// caller; the error says why and carries the figures.
func ExampleRetryError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()

	tr := client.New(nil, client.Config{Budget: 10 * time.Second})
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	start := time.Now()
	_, err := tr.RoundTrip(req)

	var re *client.RetryError
	if errors.As(err, &re) {
		fmt.Println("budget exhausted:", errors.Is(err, client.ErrBudgetExhausted))
		fmt.Println("attempts:", re.Attempts, "last status:", re.Status, "refused wait:", re.Wait)
		fmt.Println("failed fast:", time.Since(start) < time.Second)
	}
	// Output:
	// budget exhausted: true
	// attempts: 1 last status: 429 refused wait: 1h0m0s
	// failed fast: true
}

// Non-idempotent requests are retried only with an Idempotency-Key; the
// Transport can add one, the same on every attempt.
func ExampleConfig_addIdempotencyKey() {
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(keys) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	hc := &http.Client{Transport: client.New(nil, client.Config{AddIdempotencyKey: true})}
	resp, err := hc.Post(srv.URL, "application/json", strings.NewReader(`{"order":1}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, len(keys), "attempts, same key:", keys[0] != "" && keys[0] == keys[1])
	// Output: 201 2 attempts, same key: true
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{
		"120",
		"Mon, 30 Nov 2026 12:00:30 GMT",  // IMF-fixdate
		"Monday, 30-Nov-26 12:01:00 GMT", // obsolete RFC 850
		"Sun, 29 Nov 2026 12:00:00 GMT",  // in the past: retry now
		"-1",
		"1.5",
	} {
		d, ok := client.ParseRetryAfter(v, now)
		fmt.Printf("%-32q %v %v\n", v, d, ok)
	}
	// Output:
	// "120"                            2m0s true
	// "Mon, 30 Nov 2026 12:00:30 GMT"  30s true
	// "Monday, 30-Nov-26 12:01:00 GMT" 1m0s true
	// "Sun, 29 Nov 2026 12:00:00 GMT"  0s true
	// "-1"                             0s false
	// "1.5"                            0s false
}

// The summary states the policy for the next engineer to tune: here a
// provider publishing 10 req/s, paced at 80% of it.
func ExampleConfig_Summary() {
	cfg := client.Config{Quota: 10, Burst: 5, Base: 100 * time.Millisecond, Cap: 5 * time.Second, Budget: 20 * time.Second}
	fmt.Print(cfg.Summary())
	// Output:
	// retryable: 429, 500, 502, 503, 504, and transient network errors; every other status fails at once
	// backoff: full jitter, base 100ms, cap 5s; wait before retry n in [0, min(cap, base·2^(n-1))]
	// retry-after: honoured first (both forms, clamped at 0; a zero wait falls back to backoff), over rate-limit headers and backoff
	// attempts: at most 22 per call (first included), derived from the budget; their backoff waits reach at most 1m21.3s, about 40.7s on average, of the 20s budget
	// budget: 20s per call, waits included; a Retry-After wait that would cross it fails at once (ErrBudgetExhausted), a backoff draw that would is redrawn once within what remains (less the per-attempt timeout); per-attempt timeout none
	// retry budget: 500 tokens per Transport, shared by all its calls and quota keys, starting full; a retry takes 5 (10 after a timeout) or, when fewer remain, is refused (the call fails at once, ErrRetryBudgetExhausted); a call answered without a retryable status gives back its last retry's cost, or 1 after a first-attempt success, up to 500; from full, 100 retries (50 after timeouts), then about one failing retry per 5 first-attempt successes
	// idempotency: POST, PATCH and other non-idempotent methods retried only with an Idempotency-Key (not added); bodies replayed via GetBody, else not retried
	// pacing: token bucket 8 req/s, burst 5, per quota key (80% of the published 10 req/s)
	// buckets: per-process (not shared across a fleet), keyed by request host
	// slow-down: below 10% of the limit in RateLimit / X-RateLimit-Remaining, the key's remaining quota is spread until the reset
	// layers: retries at one layer only; a nested retrying Transport passes through
	// metrics: none (no observer)
}

// Effective states the defaults a zero Config runs with.
func ExampleConfig_Effective() {
	e := client.Config{}.Effective()
	fmt.Println(e.Base, e.Cap, e.Jitter, e.MaxAttempts, e.Budget, e.Retryable)
	// Output: 200ms 30s full 12 30s [429 500 502 503 504]
}

// A smaller retry budget for a Transport that makes few calls, and the
// way to turn it off. A call the budget refuses fails at once with
// errors.Is(err, client.ErrRetryBudgetExhausted).
func ExampleRetryBudget() {
	small := client.Config{RetryBudget: client.RetryBudget{Capacity: 100}}.Effective().RetryBudget
	fmt.Println("capacity", small.Capacity, "retry", small.RetryCost, "after a timeout", small.TimeoutCost, "refund", small.Refund)
	off := client.Config{RetryBudget: client.NoRetryBudget}
	fmt.Println("off:", off.RetryBudget.Off(), "tokens:", client.New(nil, off).RetryBudgetTokens())
	// Output:
	// capacity 100 retry 5 after a timeout 10 refund 1
	// off: true tokens: -1
}
