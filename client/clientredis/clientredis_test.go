package clientredis

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/client"
)

// fakeRedis is a redis.Scripter that answers the bucket script as its
// answer function says, without I/O, for tests in a synctest bubble. Like
// go-redis without ContextTimeoutEnabled, it does not heed the context: a
// hold channel, when set, blocks every call until it is closed.
type fakeRedis struct {
	mu     sync.Mutex
	answer func(op, arg string) ([]int64, error)
	hold   chan struct{}
	calls  []string // op arg, per call
}

func (f *fakeRedis) run(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	op, arg := args[2].(string), args[3].(string)
	f.mu.Lock()
	f.calls = append(f.calls, op+" "+arg)
	answer, hold := f.answer, f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	v, err := answer(op, arg)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	s := make([]any, len(v))
	for i, n := range v {
		s[i] = n
	}
	cmd.SetVal(s)
	return cmd
}

func (f *fakeRedis) set(answer func(op, arg string) ([]int64, error), hold chan struct{}) {
	f.mu.Lock()
	f.answer, f.hold = answer, hold
	f.mu.Unlock()
}

func (f *fakeRedis) nCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeRedis) lastCall() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return ""
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeRedis) Eval(ctx context.Context, _ string, _ []string, args ...any) *redis.Cmd {
	return f.run(ctx, args)
}
func (f *fakeRedis) EvalSha(ctx context.Context, _ string, _ []string, args ...any) *redis.Cmd {
	return f.run(ctx, args)
}
func (f *fakeRedis) EvalRO(ctx context.Context, _ string, _ []string, args ...any) *redis.Cmd {
	return f.run(ctx, args)
}
func (f *fakeRedis) EvalShaRO(ctx context.Context, _ string, _ []string, args ...any) *redis.Cmd {
	return f.run(ctx, args)
}
func (f *fakeRedis) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceCmd(ctx)
}
func (f *fakeRedis) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	return redis.NewStringCmd(ctx)
}

// grant answers every take with a permit after wait, and every give with 1.
func grant(wait time.Duration) func(op, arg string) ([]int64, error) {
	return func(op, _ string) ([]int64, error) {
		if op == "give" {
			return []int64{1, 0, 0}, nil
		}
		return []int64{1, wait.Microseconds(), 1e15 + wait.Microseconds()}, nil
	}
}

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func refuse(string, string) ([]int64, error) { return nil, errDown }

// events records a Limiter's fallbacks and recoveries.
type events struct {
	mu sync.Mutex
	ev []client.LimiterEvent
}

func (e *events) LimiterFallback(ev client.LimiterEvent) {
	e.mu.Lock()
	e.ev = append(e.ev, ev)
	e.mu.Unlock()
}

func (e *events) list() []client.LimiterEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]client.LimiterEvent(nil), e.ev...)
}

func newLimiter(t *testing.T, rdb redis.Scripter, o Options) *Limiter {
	t.Helper()
	l, err := New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNew(t *testing.T) {
	for _, r := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := New(&fakeRedis{}, Options{Rate: r}); err == nil || !strings.HasPrefix(err.Error(), "clientredis: New: Rate") {
			t.Errorf("New(Rate: %v) error = %v; want one about Rate", r, err)
		}
	}
	if _, err := New(nil, Options{Rate: 1}); err == nil {
		t.Error("New(nil, ...) error = nil; want an error")
	}
	tests := []struct {
		in, want   Options
		localRate  float64
		localBurst int
	}{
		{Options{Rate: 100}, Options{Rate: 100, Burst: 1, Prefix: DefaultPrefix, Processes: 1, Timeout: DefaultTimeout, MaxWait: DefaultMaxWait}, 100, 1},
		{Options{Rate: 100, Burst: 10, Processes: 4, Prefix: "p:", Timeout: time.Second, MaxWait: time.Minute},
			Options{Rate: 100, Burst: 10, Prefix: "p:", Processes: 4, Timeout: time.Second, MaxWait: time.Minute}, 25, 2},
		{Options{Rate: 100, Burst: -3, Processes: -2, Timeout: -1, MaxWait: -1}, Options{Rate: 100, Burst: 1, Prefix: DefaultPrefix, Processes: 1, Timeout: DefaultTimeout, MaxWait: DefaultMaxWait}, 100, 1},
		// Burst/N rounds down to 0: the local burst is still 1.
		{Options{Rate: 10, Burst: 3, Processes: 8}, Options{Rate: 10, Burst: 3, Prefix: DefaultPrefix, Processes: 8, Timeout: DefaultTimeout, MaxWait: DefaultMaxWait}, 1.25, 1},
	}
	for _, tt := range tests {
		l := newLimiter(t, &fakeRedis{}, tt.in)
		if got := l.Options(); got != tt.want {
			t.Errorf("New(%+v).Options() = %+v; want %+v", tt.in, got, tt.want)
		}
		if float64(l.localRate) != tt.localRate || l.localBurst != tt.localBurst {
			t.Errorf("New(%+v): local bucket %v/s burst %d; want %v/s burst %d", tt.in, l.localRate, l.localBurst, tt.localRate, tt.localBurst)
		}
	}
	if got := newLimiter(t, &fakeRedis{}, Options{Rate: 1, Prefix: "app:"}).Key("api.test"); got != "app:api.test" {
		t.Errorf("Key(api.test) = %q; want app:api.test", got)
	}
}

// TestReserveFromRedis: the script's wait is the caller's, and cancel gives
// the permit back with its instant.
func TestReserveFromRedis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{answer: grant(30 * time.Millisecond)}
		l := newLimiter(t, f, Options{Rate: 100, MaxWait: 2 * time.Second})
		wait, cancel, err := l.Reserve(t.Context(), "k", time.Now())
		if err != nil || wait != 30*time.Millisecond {
			t.Fatalf("Reserve = %v, %v; want 30ms, nil", wait, err)
		}
		if got := f.lastCall(); got != "take 2000000" {
			t.Errorf("script called with %q; want take 2000000 (MaxWait in µs)", got)
		}
		cancel()
		if got := f.lastCall(); got != "give 1000000000030000" {
			t.Errorf("cancel called the script with %q; want give 1000000000030000 (the permit's instant)", got)
		}
	})
}

// TestFallbackAndRecovery: a failing Redis makes the Limiter pace locally at
// Rate/N without an error to the caller, the Observer told once; Redis is
// tried again at most once per ProbeInterval, and the first answer
// recovers.
func TestFallbackAndRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{answer: refuse}
		ev := &events{}
		l := newLimiter(t, f, Options{Rate: 100, Burst: 8, Processes: 4, Observer: ev})
		now := time.Now()
		// Local bucket: 25/s, burst 2.
		for i, want := range []time.Duration{0, 0, 40 * time.Millisecond, 80 * time.Millisecond} {
			wait, _, err := l.Reserve(t.Context(), "k", now)
			if err != nil || wait != want {
				t.Fatalf("Reserve #%d while Redis refuses = %v, %v; want %v, nil", i+1, wait, err, want)
			}
		}
		if !l.FellBack() {
			t.Error("FellBack() = false after a refused call")
		}
		if n := f.nCalls(); n != 1 {
			t.Errorf("%d Redis calls for 4 reservations; want 1 (then no probe before %v)", n, ProbeInterval)
		}
		got := ev.list()
		if len(got) != 1 || !got[0].FellBack || !errors.Is(got[0].Err, errDown) || got[0].Key != "k" || got[0].Rate != 25 {
			t.Fatalf("events %+v; want one fallback for key k with the dial error and rate 25", got)
		}

		// Just before the interval: still no probe.
		time.Sleep(ProbeInterval - time.Millisecond) // synctest: virtual time
		l.Reserve(t.Context(), "k", time.Now())
		if n := f.nCalls(); n != 1 {
			t.Errorf("%d Redis calls %v after the failure; want 1", n, ProbeInterval-time.Millisecond)
		}
		// At the interval: one probe, which fails; no new event.
		time.Sleep(time.Millisecond) // synctest: virtual time
		for range 5 {
			if _, _, err := l.Reserve(t.Context(), "k", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if n := f.nCalls(); n != 2 {
			t.Errorf("%d Redis calls after %v; want 2 (one probe)", n, ProbeInterval)
		}
		if n := len(ev.list()); n != 1 {
			t.Errorf("%d events after a failed probe; want still 1", n)
		}

		// Redis is back: the next probe, a second later, recovers and its
		// permit comes from Redis.
		f.set(grant(7*time.Millisecond), nil)
		time.Sleep(ProbeInterval / 2) // synctest: virtual time
		l.Reserve(t.Context(), "k", time.Now())
		if n := f.nCalls(); n != 2 {
			t.Errorf("%d Redis calls half an interval after the failed probe; want 2", n)
		}
		time.Sleep(ProbeInterval / 2) // synctest: virtual time
		wait, _, err := l.Reserve(t.Context(), "k", time.Now())
		if err != nil || wait != 7*time.Millisecond {
			t.Errorf("Reserve on recovery = %v, %v; want Redis's 7ms, nil", wait, err)
		}
		if l.FellBack() {
			t.Error("FellBack() = true after a successful probe")
		}
		got = ev.list()
		if len(got) != 2 || got[1].FellBack || got[1].Err != nil || got[1].Key != "k" {
			t.Errorf("events %+v; want a fallback then a recovery for key k", got)
		}
		l.Reserve(t.Context(), "k", time.Now())
		if n := f.nCalls(); n != 4 {
			t.Errorf("%d Redis calls after recovery; want every call to ask Redis again (4)", n)
		}
	})
}

// TestFallbackAfterRedisPermits: a process that falls back gives its first
// local permit no sooner than the last permit it took from Redis for the
// key, so its waiting callers are not doubled; other keys are not held.
func TestFallbackAfterRedisPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		f := &fakeRedis{answer: func(op, arg string) ([]int64, error) {
			w := time.Duration(n.Add(1)-1) * 100 * time.Millisecond // 0, 100 ms, 200 ms
			return []int64{1, w.Microseconds(), 0}, nil
		}}
		l := newLimiter(t, f, Options{Rate: 40, Burst: 4, Processes: 4})
		now := time.Now()
		for range 3 {
			l.Reserve(t.Context(), "k", now)
		}
		f.set(refuse, nil)
		// 10/s, burst 1, from +200 ms.
		for i, want := range []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond} {
			if wait, _, err := l.Reserve(t.Context(), "k", now); err != nil || wait != want {
				t.Errorf("local Reserve #%d of key k = %v, %v; want %v, nil", i+1, wait, err, want)
			}
		}
		if wait, _, err := l.Reserve(t.Context(), "other", now); err != nil || wait != 0 {
			t.Errorf("local Reserve of another key = %v, %v; want 0, nil", wait, err)
		}
	})
}

// TestOneProbeAtATime: while a probe is in flight, other calls pace
// locally without asking Redis.
func TestOneProbeAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{answer: refuse}
		l := newLimiter(t, f, Options{Rate: 1000, Timeout: time.Second})
		l.Reserve(t.Context(), "k", time.Now())
		time.Sleep(ProbeInterval)
		hold := make(chan struct{})
		f.set(grant(0), hold)
		probed := make(chan error)
		go func() {
			_, _, err := l.Reserve(t.Context(), "k", time.Now())
			probed <- err
		}()
		synctest.Wait() // the probe is blocked in Redis
		for range 10 {
			if _, _, err := l.Reserve(t.Context(), "k", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if n := f.nCalls(); n != 2 {
			t.Errorf("%d Redis calls with a probe in flight; want 2 (the failure and the probe)", n)
		}
		close(hold)
		if err := <-probed; err != nil {
			t.Fatal(err)
		}
		if l.FellBack() {
			t.Error("FellBack() = true after the probe answered")
		}
	})
}

// TestTimeout: a Redis that does not answer (and a client that does not
// heed the context) costs a caller Timeout, then the Limiter falls back.
func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		defer close(hold)
		f := &fakeRedis{answer: grant(0), hold: hold}
		ev := &events{}
		l := newLimiter(t, f, Options{Rate: 10, Observer: ev})
		start := time.Now()
		wait, _, err := l.Reserve(t.Context(), "k", start)
		if err != nil || wait != 0 {
			t.Fatalf("Reserve against a hung Redis = %v, %v; want 0, nil (local bucket)", wait, err)
		}
		if took := time.Since(start); took != DefaultTimeout {
			t.Errorf("Reserve took %v; want DefaultTimeout %v", took, DefaultTimeout)
		}
		got := ev.list()
		if len(got) != 1 || !errors.Is(got[0].Err, context.DeadlineExceeded) || !strings.Contains(got[0].Err.Error(), "no answer within 50ms") {
			t.Errorf("events %+v; want one fallback whose error says no answer within 50ms", got)
		}
	})
}

// TestCallerContext: a caller whose context ends during the Redis call
// gets its context's error; Redis is not blamed.
func TestCallerContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		defer close(hold)
		f := &fakeRedis{answer: grant(0), hold: hold}
		ev := &events{}
		l := newLimiter(t, f, Options{Rate: 10, Observer: ev})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		_, _, err := l.Reserve(ctx, "k", time.Now())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Reserve with a context ending first = %v; want context.DeadlineExceeded", err)
		}
		if l.FellBack() || len(ev.list()) != 0 {
			t.Errorf("FellBack() = %v, events %+v; want no fallback", l.FellBack(), ev.list())
		}
	})
}

// TestWaitTooLong: a permit past MaxWait is not reserved, from Redis or
// from the local bucket.
func TestWaitTooLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{answer: func(string, string) ([]int64, error) { return []int64{0, 3e6, 0}, nil }}
		l := newLimiter(t, f, Options{Rate: 1, MaxWait: 2 * time.Second})
		wait, cancel, err := l.Reserve(t.Context(), "k", time.Now())
		if !errors.Is(err, ErrWaitTooLong) || wait != 3*time.Second || cancel != nil {
			t.Errorf("Reserve = %v, %v, cancel %v; want 3s, ErrWaitTooLong, nil", wait, err, cancel != nil)
		}
		if want := `clientredis: wait too long: key "k" would wait 3s, past MaxWait 2s`; err == nil || err.Error() != want {
			t.Errorf("error %q; want %q", err, want)
		}

		f.set(refuse, nil)
		now := time.Now()
		for i, want := range []time.Duration{0, time.Second, 2 * time.Second} {
			if wait, _, err := l.Reserve(t.Context(), "k", now); err != nil || wait != want {
				t.Fatalf("local Reserve #%d = %v, %v; want %v, nil", i+1, wait, err, want)
			}
		}
		if _, _, err := l.Reserve(t.Context(), "k", now); !errors.Is(err, ErrWaitTooLong) {
			t.Errorf("local Reserve past MaxWait = %v; want ErrWaitTooLong", err)
		}
		// Refused permits were not taken: the next second frees one slot.
		if wait, _, err := l.Reserve(t.Context(), "k", now.Add(time.Second)); err != nil || wait != 2*time.Second {
			t.Errorf("local Reserve a second later = %v, %v; want 2s, nil", wait, err)
		}
	})
}

// TestMalformedReply: a reply that is not the script's (another script
// under the same SHA, a proxy) is a Redis failure, not a wait.
func TestMalformedReply(t *testing.T) {
	for _, v := range [][]int64{nil, {1, 2}, {1, 2, 3, 4}, {2, 0, 0}, {-1, 0, 0}, {1, -5, 0}, {1, math.MaxInt64, 0}} {
		if r, err := parseReply(v); err == nil {
			t.Errorf("parseReply(%v) = %+v, nil; want an error", v, r)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{answer: func(string, string) ([]int64, error) { return []int64{1, -1, 0}, nil }}
		ev := &events{}
		l := newLimiter(t, f, Options{Rate: 10, Observer: ev})
		if wait, _, err := l.Reserve(t.Context(), "k", time.Now()); err != nil || wait != 0 {
			t.Errorf("Reserve on a malformed reply = %v, %v; want the local bucket's 0, nil", wait, err)
		}
		if got := ev.list(); len(got) != 1 || !strings.Contains(got[0].Err.Error(), "unexpected reply [1 -1 0]") {
			t.Errorf("events %+v; want a fallback naming the reply", got)
		}
	})
}

// TestCancel: cancel gives a Redis permit back with one script call, but
// not while fallen back; a local permit goes back to the local bucket.
func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{answer: grant(time.Second)}
		l := newLimiter(t, f, Options{Rate: 1})
		_, cancel, _ := l.Reserve(t.Context(), "k", time.Now())
		f.set(refuse, nil)
		l.Reserve(t.Context(), "k", time.Now()) // falls back
		n := f.nCalls()
		cancel()
		if f.nCalls() != n {
			t.Errorf("cancel while fallen back called Redis (%s)", f.lastCall())
		}
		now := time.Now()
		l.Reserve(t.Context(), "j", now) // the local burst
		wait, cancel, _ := l.Reserve(t.Context(), "j", now)
		if wait != time.Second {
			t.Fatalf("second local Reserve waits %v; want 1s", wait)
		}
		cancel()
		if wait, _, _ := l.Reserve(t.Context(), "j", now); wait != time.Second {
			t.Errorf("local Reserve after a cancel waits %v; want 1s (the permit given back)", wait)
		}
	})
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// pacingObserver counts a Transport's pacing waits and the Limiter's events.
type pacingObserver struct {
	client.NopObserver
	events
	waits atomic.Int64
}

func (o *pacingObserver) PacingWait(client.PacingEvent) { o.waits.Add(1) }

// TestTransportFallback: a Transport whose Limiter loses Redis goes on
// sending, paced at Rate/N, with no error to its caller.
func TestTransportFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{answer: refuse}
		obs := &pacingObserver{}
		l := newLimiter(t, f, Options{Rate: 40, Burst: 4, Processes: 4, Observer: obs})
		var sent []time.Duration
		start := time.Now()
		next := rtFunc(func(*http.Request) (*http.Response, error) {
			sent = append(sent, time.Since(start))
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
		})
		hc := &http.Client{Transport: client.New(next, client.Config{Limiter: l, Observer: obs})}
		for range 4 {
			resp, err := hc.Get("http://api.test/")
			if err != nil {
				t.Fatalf("Get with Redis down: %v; want no error", err)
			}
			resp.Body.Close()
		}
		// 10/s, burst 1: one at once, then one every 100 ms.
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
		for i := range want {
			if sent[i] != want[i] {
				t.Errorf("attempts sent at %v; want %v", sent, want)
				break
			}
		}
		if n := obs.waits.Load(); n != 3 {
			t.Errorf("%d pacing waits; want 3", n)
		}
		if got := obs.list(); len(got) != 1 || got[0].Key != "api.test" || got[0].Rate != 10 {
			t.Errorf("events %+v; want one fallback for key api.test at 10/s", got)
		}
	})
}
