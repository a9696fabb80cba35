package client

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestAttemptsFor(t *testing.T) {
	tests := []struct {
		base, cap, budget time.Duration
		j                 Jitter
		want              int
	}{
		// Full jitter, means .1 .2 .4 .8 1.6 then 2 s each: 24 retries
		// reach 41.1 s ≥ 2·20 s.
		{200 * time.Millisecond, 4 * time.Second, 20 * time.Second, JitterFull, 25},
		{DefaultBase, DefaultCap, DefaultBudget, JitterFull, 12},
		// A budget shorter than the first mean wait still allows a retry.
		{time.Second, time.Second, time.Millisecond, JitterFull, 2},
		// Bounded.
		{time.Nanosecond, time.Nanosecond, time.Hour, JitterFull, MaxDerivedAttempts},
	}
	for _, tt := range tests {
		if got := AttemptsFor(tt.base, tt.cap, tt.budget, tt.j); got != tt.want {
			t.Errorf("AttemptsFor(%v, %v, %v, %v) = %d; want %d", tt.base, tt.cap, tt.budget, tt.j, got, tt.want)
		}
	}
	// Every mode's mean waits of the derived cap cover twice the budget.
	for _, j := range []Jitter{JitterFull, JitterEqual, JitterDecorrelated} {
		e := Config{Base: 100 * time.Millisecond, Cap: 2 * time.Second, Budget: 20 * time.Second, Jitter: j}.Effective()
		if _, mean := waitReach(e, e.MaxAttempts); mean < 2*e.Budget {
			t.Errorf("%v: derived %d attempts wait %v on average; want ≥ 2·%v", j, e.MaxAttempts, mean, e.Budget)
		}
		if _, mean := waitReach(e, e.MaxAttempts-1); mean >= 2*e.Budget {
			t.Errorf("%v: %d attempts already wait %v on average; want the fewest", j, e.MaxAttempts-1, mean)
		}
	}
}

// TestSummaryShowsAttemptBudgetMismatch: an explicit cap whose waits fall
// short of the budget is flagged; a derived one states where it comes from.
func TestSummaryShowsAttemptBudgetMismatch(t *testing.T) {
	s := Config{MaxAttempts: 5}.Summary()
	want := "attempts: at most 5 per call (first included); their backoff waits reach at most 3s, about 1.5s on average, of the 30s budget; MISMATCH"
	if !strings.Contains(s, want) {
		t.Errorf("Config{MaxAttempts: 5}.Summary() lacks %q:\n%s", want, s)
	}
	s = Config{}.Summary()
	if !strings.Contains(s, "attempts: at most 12 per call (first included), derived from the budget; their backoff waits reach at most 2m21s, about 1m10.5s on average, of the 30s budget\n") {
		t.Errorf("Config{}.Summary() does not state the derived cap and its reach:\n%s", s)
	}
	if strings.Contains(s, "MISMATCH") {
		t.Errorf("Config{}.Summary() flags a mismatch:\n%s", s)
	}
}

// outageThen answers 503 until the outage ends, then 200.
func outageThen(start time.Time, outage time.Duration) func(int, *http.Request) (*http.Response, error) {
	return func(int, *http.Request) (*http.Response, error) {
		if time.Since(start) < outage {
			return reply(503), nil
		}
		return reply(200), nil
	}
}

// TestDerivedCapSurvivesOutageWithinBudget: outage-bare's policy (base
// 200ms, cap 4s, budget 20s) against an 8 s outage of bare 503s, 300
// seeds: with the cap derived from the budget no call is lost; with the
// explicit 10 attempts the scenario used to state, some are (their waits
// average 11 s, and a call with small draws runs out before 8 s).
func TestDerivedCapSurvivesOutageWithinBudget(t *testing.T) {
	lost := func(maxAttempts int) int {
		n := 0
		for seed := range uint64(300) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(outageThen(time.Now(), 8*time.Second))
				cfg := Config{Base: 200 * time.Millisecond, Cap: 4 * time.Second, Budget: 20 * time.Second,
					MaxAttempts: maxAttempts, Rand: rand.New(rand.NewPCG(seed, 7))}
				resp, err := get(t, New(f, cfg), "http://api.test/x")
				if err != nil {
					n++
					return
				}
				resp.Body.Close()
			})
		}
		return n
	}
	if n := lost(0); n != 0 {
		t.Errorf("derived cap: %d of 300 calls lost to an 8s outage within a 20s budget; want 0", n)
	}
	if n := lost(10); n == 0 {
		t.Errorf("10 attempts: no call of 300 lost; want some (the mismatch this test guards against)")
	}
}

// TestLastBackoffRedrawnWithinBudget: a backoff draw that would cross the
// budget is redrawn once within what remains less the attempt timeout, so
// a last attempt goes out; the next such draw ends the call.
func TestLastBackoffRedrawnWithinBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(statuses(503))
		cfg := seeded(Config{Base: time.Hour, Cap: time.Hour, Budget: 10 * time.Second, AttemptTimeout: 4 * time.Second, MaxAttempts: 10})
		start := time.Now()
		_, err := get(t, New(f, cfg), "http://api.test/x")
		var re *RetryError
		if !errors.Is(err, ErrBudgetExhausted) || !errors.As(err, &re) {
			t.Fatalf("err = %v; want ErrBudgetExhausted", err)
		}
		a := f.attempts()
		if len(a) != 2 || a[1].at >= 6*time.Second || re.Attempts != 2 {
			t.Fatalf("attempts at %v (error says %d); want 2, the second before 10s-4s", a, re.Attempts)
		}
		if d := time.Since(start); d != a[1].at {
			t.Errorf("call ended at %v; want at once after the second attempt (%v)", d, a[1].at)
		}
	})
	// A Retry-After past the budget is never shortened.
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(int, *http.Request) (*http.Response, error) { return reply(503, "Retry-After", "30"), nil })
		_, err := get(t, New(f, seeded(Config{Budget: 10 * time.Second})), "http://api.test/x")
		if !errors.Is(err, ErrBudgetExhausted) || len(f.attempts()) != 1 {
			t.Errorf("err = %v after %d attempts; want ErrBudgetExhausted after 1", err, len(f.attempts()))
		}
	})
}
