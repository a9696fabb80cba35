package client

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey string

// TestAttemptContextTimerCause checks the attempt's context as the next
// transport sees it when the Transport's deadline ends the attempt: it has
// that deadline, Err is context.DeadlineExceeded and context.Cause the
// Transport's reason, whether or not Done was asked for before the deadline
// passed.
func TestAttemptContextTimerCause(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		wantErr  error
		waitDone bool // next blocks on Done (else it sleeps past the limit)
	}{
		{"budget, Done", Config{Budget: 5 * time.Second, MaxAttempts: 1}, ErrBudgetExhausted, true},
		{"budget, no Done", Config{Budget: 5 * time.Second, MaxAttempts: 1}, ErrBudgetExhausted, false},
		{"attempt timeout, Done", Config{AttemptTimeout: time.Second, MaxAttempts: 1}, ErrAttemptTimeout, true},
		{"attempt timeout, no Done", Config{AttemptTimeout: time.Second, MaxAttempts: 1}, ErrAttemptTimeout, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var err, cause, errAfter error
				var val any
				var deadline time.Time
				var hasDeadline bool
				start := time.Now()
				f := newFake(func(_ int, req *http.Request) (*http.Response, error) {
					ctx := req.Context()
					deadline, hasDeadline = ctx.Deadline()
					if tt.waitDone {
						<-ctx.Done()
					} else {
						time.Sleep(time.Hour) // synctest: virtual time
					}
					err = ctx.Err()
					cause = context.Cause(ctx)
					errAfter = ctx.Err()
					val = ctx.Value(ctxKey("k"))
					select {
					case <-ctx.Done():
					default:
						t.Error("Done not closed after the timer fired")
					}
					return reply(200), nil
				})
				req, _ := http.NewRequestWithContext(context.WithValue(context.Background(), ctxKey("k"), "v"), http.MethodGet, "http://api.test/x", nil)
				_, rerr := New(f, seeded(tt.cfg)).RoundTrip(req)
				if !errors.Is(rerr, tt.wantErr) {
					t.Errorf("RoundTrip err = %v; want %v", rerr, tt.wantErr)
				}
				if err != context.DeadlineExceeded || errAfter != context.DeadlineExceeded {
					t.Errorf("attempt ctx.Err() = %v, then %v; want context.DeadlineExceeded", err, errAfter)
				}
				limit := tt.cfg.Budget
				if tt.cfg.AttemptTimeout > 0 {
					limit = tt.cfg.AttemptTimeout
				}
				if want := start.Add(limit); !hasDeadline || !deadline.Equal(want) {
					t.Errorf("attempt ctx.Deadline() = %v, %v; want %v, true", deadline, hasDeadline, want)
				}
				if cause != tt.wantErr {
					t.Errorf("context.Cause(attempt ctx) = %v; want %v", cause, tt.wantErr)
				}
				if val != "v" {
					t.Errorf("attempt ctx.Value(k) = %v; want the parent's v", val)
				}
			})
		})
	}
}

// TestAttemptContextParentCancel checks that the caller's cancellation,
// with its cause, reaches a timed attempt, observed by Err alone or by Done.
func TestAttemptContextParentCancel(t *testing.T) {
	for _, waitDone := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			boom := errors.New("caller gave up")
			ctx, cancel := context.WithCancelCause(context.Background())
			var err, cause error
			f := newFake(func(_ int, req *http.Request) (*http.Response, error) {
				actx := req.Context()
				if waitDone {
					<-actx.Done()
				} else {
					time.Sleep(2 * time.Second) // synctest: virtual time
				}
				err, cause = actx.Err(), context.Cause(actx)
				return nil, err
			})
			go func() {
				time.Sleep(time.Second) // synctest: virtual time
				cancel(boom)
			}()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/x", nil)
			_, rerr := New(f, seeded(Config{})).RoundTrip(req)
			if !errors.Is(rerr, context.Canceled) || errors.Is(rerr, ErrBudgetExhausted) {
				t.Errorf("waitDone=%v: RoundTrip err = %v; want context.Canceled", waitDone, rerr)
			}
			if err != context.Canceled || cause != boom {
				t.Errorf("waitDone=%v: attempt Err, Cause = %v, %v; want context.Canceled, %v", waitDone, err, cause, boom)
			}
		})
	}
}

// TestAttemptContextChildren checks contexts derived from a timed attempt
// (as http.Transport derives its own) and context.AfterFunc: they end with
// the attempt, with its cause, and no goroutine is left behind (synctest
// would report it), nor started to watch it.
func TestAttemptContextChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var childCause error
		var afterRan bool
		f := newFake(func(_ int, req *http.Request) (*http.Response, error) {
			n := runtime.NumGoroutine()
			child, cancel := context.WithCancel(req.Context())
			defer cancel()
			stop := context.AfterFunc(req.Context(), func() { afterRan = true })
			defer stop()
			if m := runtime.NumGoroutine(); m != n {
				t.Errorf("goroutines %d -> %d deriving from the attempt context; want none started (registered as children)", n, m)
			}
			if child.Value(layerKey{}) == nil {
				t.Error("child of the attempt context lost the one-layer marker")
			}
			<-child.Done()
			childCause = context.Cause(child)
			synctest.Wait()
			return nil, child.Err()
		})
		_, err := get(t, New(f, seeded(Config{Budget: time.Second})), "http://api.test/x")
		if !errors.Is(err, ErrBudgetExhausted) {
			t.Errorf("RoundTrip err = %v; want ErrBudgetExhausted", err)
		}
		if childCause != ErrBudgetExhausted || !afterRan {
			t.Errorf("child cause = %v, AfterFunc ran = %v; want ErrBudgetExhausted, true", childCause, afterRan)
		}
	})
}

// TestAttemptContextReleasedByClose checks that closing a delivered body
// cancels the attempt's context, and that the caller ending later does not
// change what it reports.
func TestAttemptContextReleasedByClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		f := newFake(statuses(200))
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/x", nil)
		resp, err := New(f, seeded(Config{Budget: time.Minute})).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		actx := resp.Request.Context()
		if err := actx.Err(); err != nil {
			t.Fatalf("attempt ctx.Err() before Close = %v; want nil", err)
		}
		resp.Body.Close()
		if err := actx.Err(); err != context.Canceled {
			t.Errorf("attempt ctx.Err() after Close = %v; want context.Canceled", err)
		}
		time.Sleep(2 * time.Hour) // synctest, virtual time: the caller's deadline passes
		<-actx.Done()
		if err, cause := actx.Err(), context.Cause(actx); err != context.Canceled || cause != context.Canceled {
			t.Errorf("attempt Err, Cause after the caller's deadline = %v, %v; want context.Canceled twice", err, cause)
		}
		if !f.bodies[0].closed.Load() {
			t.Error("next's body not closed")
		}
	})
}

// refilling empties t's retry budget and makes it big enough that its
// refunds never fill it within a benchmark: every success gives back.
func refilling(t *Transport) *Transport {
	t.rb.capacity = 1 << 62
	t.rb.tokens.Store(0)
	return t
}

// TestSuccessPathAllocs pins the success path's cost: at most 6
// allocations over the next transport's own with the Transport's deadline
// (the call's marker context, the attempt, and context.WithDeadlineCause's
// context, cancel func, timer and timer callback), 2 without (BenchmarkOverhead
// has the figures); the retry budget adds none, refilling or full.
func TestSuccessPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	next := okNext{h: http.Header{"Content-Type": {"text/plain"}}}
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/x", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	tests := []struct {
		name string
		rt   http.RoundTripper
		req  *http.Request
		want float64
	}{
		{"bare", next, req, 1},
		{"transport", New(next, Config{}), req, 1 + 6},
		{"transport-caller-deadline", New(next, Config{Budget: 2 * time.Hour}), req.WithContext(ctx), 1 + 2},
		// A retry budget below its capacity: every success gives tokens back.
		{"transport-budget-refilling", refilling(New(next, Config{})), req, 1 + 6},
		{"transport-no-retry-budget", New(next, Config{RetryBudget: NoRetryBudget}), req, 1 + 6},
	}
	for _, tt := range tests {
		got := testing.AllocsPerRun(100, func() {
			resp, err := tt.rt.RoundTrip(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
		t.Logf("%s: %v allocs per request", tt.name, got)
		if got > tt.want {
			t.Errorf("%s: allocs per request = %v; want <= %v", tt.name, got, tt.want)
		}
	}
}
