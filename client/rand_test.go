package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/client/internal/variant"
)

// TestWithRandDrawsPerCall: a call whose context carries a source
// (WithRand) draws its backoff and its Idempotency-Key from that source,
// whatever the Transport's own source is and whatever other calls drew
// before; the Transport's own source is left untouched by it. A
// Variant's backoff gets the call's source too.
func TestWithRandDrawsPerCall(t *testing.T) {
	type call struct {
		key   string
		times []time.Duration
	}
	post := func(t *testing.T, tr *Transport, f *fake, r *rand.Rand) call {
		t.Helper()
		before := len(f.attempts())
		start := time.Now()
		req, _ := http.NewRequestWithContext(WithRand(context.Background(), r), http.MethodPost, "http://api.test/x", nil)
		if resp, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		a := f.attempts()[before:]
		c := call{key: a[0].header.Get("Idempotency-Key")}
		for _, s := range a {
			c.times = append(c.times, s.at-start.Sub(f.start))
		}
		return c
	}
	every3 := func(n int, _ *http.Request) (*http.Response, error) {
		if n%3 == 2 {
			return reply(200), nil
		}
		return reply(503), nil
	}
	callSource := func() *rand.Rand { return rand.New(rand.NewPCG(7, 8)) }
	synctest.Test(t, func(t *testing.T) {
		f1, f2 := newFake(every3), newFake(every3)
		t1 := New(f1, Config{AddIdempotencyKey: true, Rand: rand.New(rand.NewPCG(1, 1))})
		t2 := New(f2, Config{AddIdempotencyKey: true, Rand: rand.New(rand.NewPCG(99, 99))})
		a := post(t, t1, f1, callSource())
		post(t, t2, f2, nil) // t2's own source draws first: no matter
		b := post(t, t2, f2, callSource())
		if len(a.times) != 3 || a.key == "" || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("one call source, two Transports: %v and %v; want the same key and attempt times, 3 attempts", a, b)
		}
		// t1's own source was not drawn from: its next call without a
		// source draws what a fresh Transport's first call draws.
		f3 := newFake(every3)
		t3 := New(f3, Config{AddIdempotencyKey: true, Rand: rand.New(rand.NewPCG(1, 1))})
		if own, fresh := post(t, t1, f1, nil), post(t, t3, f3, nil); fmt.Sprint(own) != fmt.Sprint(fresh) {
			t.Errorf("after a call with its own source, the Transport's draws %v; a fresh Transport's %v: want equal", own, fresh)
		}
		if own := post(t, t1, f1, nil); own.key == a.key {
			t.Errorf("a call without a source drew the key %s of the call source", own.key)
		}
		// A Variant's backoff draws from the call's source.
		var got *rand.Rand
		want := callSource()
		fv := newFake(every3)
		tv := newVariant(fv, Config{}, variant.Variant{Backoff: func(r *rand.Rand, _ int, _ time.Duration) time.Duration {
			got = r
			return time.Millisecond
		}})
		req, _ := http.NewRequestWithContext(WithRand(context.Background(), want), http.MethodGet, "http://api.test/x", nil)
		if resp, err := tv.RoundTrip(req); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		if got != want {
			t.Errorf("the Variant's Backoff got source %p; want the call's %p", got, want)
		}
	})
	if ctx := context.Background(); WithRand(ctx, nil) != ctx {
		t.Errorf("WithRand(ctx, nil) is not ctx")
	}
}
