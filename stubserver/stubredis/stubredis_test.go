package stubredis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/internal/redistest"
	"github.com/retrylab/retrylab/stubserver"
)

// newRedis starts a redis-server for t and returns it with a client on
// it (ContextTimeoutEnabled, closed when t ends).
func newRedis(t *testing.T) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return srv, rdb
}

// patient is a Timeout no test that is not about timeouts reaches: the
// race detector and a busy 2-core host can stretch a round trip.
const patient = 10 * time.Second

func mustRedisLimiter(t *testing.T, rdb *redis.Client, o Options, tier string, ls []stubserver.Limit) *Limiter {
	t.Helper()
	lim, err := NewLimiter(rdb, o, stubserver.LimiterSpec{Tier: tier, Limits: ls})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func mustMemLimiter(t *testing.T, ls []stubserver.Limit) stubserver.Limiter {
	t.Helper()
	lim, err := stubserver.NewMemoryLimiter(stubserver.LimiterSpec{Limits: stubserver.Named(ls)})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func take(t *testing.T, lim stubserver.Limiter, now time.Time, cost int, keys ...string) stubserver.Decision {
	t.Helper()
	c := stubserver.Charge{Cost: cost}
	copy(c.Keys[:], keys)
	d, err := lim.Take(context.Background(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// t0 is a start instant in whole µs, as Redis's clock counts; not on a
// window's edge.
var t0 = time.Unix(1_767_225_600, 123_456_000)

// sameCase is one quota driven through the memory and the Redis limiter.
type sameCase struct {
	name   string
	limits []stubserver.Limit
	// scale is the typical gap between requests; gaps are drawn from 0 to
	// a few times it.
	scale time.Duration
	// back, when set, makes one gap in ten step the clock back.
	back bool
}

var (
	sec = time.Second
	tb  = stubserver.AlgTokenBucket
	fw  = stubserver.AlgFixedWindow
	sw  = stubserver.AlgSlidingWindow
	swl = stubserver.AlgSlidingWindowLog
	lk  = stubserver.AlgLeakyBucket
)

var sameCases = []sameCase{
	{name: "token-bucket", limits: []stubserver.Limit{{Algorithm: tb, Limit: 10, Per: sec}}, scale: 80 * time.Millisecond},
	{name: "token-bucket burst 3", limits: []stubserver.Limit{{Algorithm: tb, Limit: 10, Per: sec, Burst: 3}}, scale: 60 * time.Millisecond},
	{name: "token-bucket 0.5/s", limits: []stubserver.Limit{{Limit: 0.5, Per: sec, Burst: 2}}, scale: time.Second},
	{name: "token-bucket 7/1.5s per client", limits: []stubserver.Limit{{Algorithm: tb, Limit: 7, Per: 1500 * time.Millisecond, Burst: 4, Key: stubserver.KeyClient}}, scale: 70 * time.Millisecond},
	{name: "fixed-window", limits: []stubserver.Limit{{Algorithm: fw, Limit: 5, Per: sec}}, scale: 90 * time.Millisecond},
	{name: "fixed-window 3/1.5s", limits: []stubserver.Limit{{Algorithm: fw, Limit: 3, Per: 1500 * time.Millisecond}}, scale: 200 * time.Millisecond},
	{name: "sliding-window", limits: []stubserver.Limit{{Algorithm: sw, Limit: 10, Per: sec}}, scale: 60 * time.Millisecond},
	{name: "sliding-window 7/700ms per api-key", limits: []stubserver.Limit{{Algorithm: sw, Limit: 7, Per: 700 * time.Millisecond, Key: stubserver.KeyAPIKey}}, scale: 40 * time.Millisecond},
	{name: "sliding-window-log", limits: []stubserver.Limit{{Algorithm: swl, Limit: 5, Per: sec}}, scale: 100 * time.Millisecond},
	{name: "sliding-window-log 40/1m", limits: []stubserver.Limit{{Algorithm: swl, Limit: 40, Per: time.Minute}}, scale: 700 * time.Millisecond},
	{name: "leaky-bucket meter", limits: []stubserver.Limit{{Algorithm: lk, Limit: 5, Per: sec, Burst: 3}}, scale: 120 * time.Millisecond},
	{name: "leaky-bucket meter 3/s", limits: []stubserver.Limit{{Algorithm: lk, Limit: 3, Per: sec}}, scale: 200 * time.Millisecond},
	{name: "leaky-bucket shape", limits: []stubserver.Limit{{Algorithm: lk, Mode: stubserver.ModeShape, Limit: 5, Per: sec, Burst: 2}}, scale: 100 * time.Millisecond},
	{name: "leaky-bucket shape 3/s max 400ms", limits: []stubserver.Limit{{Algorithm: lk, Mode: stubserver.ModeShape, Limit: 3, Per: sec, Burst: 1, MaxDelay: 400 * time.Millisecond}}, scale: 150 * time.Millisecond},
	{name: "layered second minute day", limits: []stubserver.Limit{
		{Algorithm: tb, Limit: 10, Per: sec, Burst: 20},
		{Algorithm: sw, Limit: 300, Per: time.Minute},
		{Algorithm: fw, Limit: 10000, Per: 24 * time.Hour},
	}, scale: 50 * time.Millisecond},
	{name: "layered mixed keys", limits: []stubserver.Limit{
		{Name: "per-client", Algorithm: tb, Limit: 5, Per: sec, Burst: 3, Key: stubserver.KeyClient},
		{Name: "global", Algorithm: swl, Limit: 12, Per: sec},
		{Name: "per-key", Algorithm: lk, Mode: stubserver.ModeShape, Limit: 8, Per: sec, Burst: 4, Key: stubserver.KeyAPIKey},
		{Name: "per-endpoint", Algorithm: fw, Limit: 6, Per: 2 * sec, Key: stubserver.KeyEndpoint},
	}, scale: 40 * time.Millisecond},
	{name: "every algorithm", limits: []stubserver.Limit{
		{Name: "a", Algorithm: tb, Limit: 20, Per: sec, Burst: 6},
		{Name: "b", Algorithm: fw, Limit: 15, Per: sec},
		{Name: "c", Algorithm: sw, Limit: 15, Per: sec, Key: stubserver.KeyClient},
		{Name: "d", Algorithm: swl, Limit: 12, Per: sec},
		{Name: "e", Algorithm: lk, Limit: 20, Per: sec, Burst: 5},
		{Name: "f", Algorithm: lk, Mode: stubserver.ModeShape, Limit: 25, Per: sec, Burst: 3, MaxDelay: 200 * time.Millisecond},
		{Name: "g", Algorithm: tb, Limit: 100, Per: time.Minute, Key: stubserver.KeyEndpoint},
		{Name: "h", Algorithm: sw, Limit: 400, Per: time.Hour},
	}, scale: 30 * time.Millisecond},
	{name: "clock steps back", limits: []stubserver.Limit{
		{Name: "a", Algorithm: tb, Limit: 10, Per: sec, Burst: 4},
		{Name: "b", Algorithm: fw, Limit: 8, Per: sec},
		{Name: "c", Algorithm: sw, Limit: 8, Per: sec},
		{Name: "d", Algorithm: swl, Limit: 6, Per: sec},
		{Name: "e", Algorithm: lk, Limit: 10, Per: sec, Burst: 3},
	}, scale: 60 * time.Millisecond, back: true},
}

// TestSameDecisionsAsMemory drives the memory limiter and the Redis one
// (on the callers' clock) with one sequence of charges per quota: gaps
// from 0 to a few typical ones, costs from 1 to past the smallest
// capacity, keys from a small set per limit. Every Decision must be the
// same, field for field.
func TestSameDecisionsAsMemory(t *testing.T) {
	_, rdb := newRedis(t)
	for ci, tc := range sameCases {
		t.Run(tc.name, func(t *testing.T) {
			ls := stubserver.Named(tc.limits)
			mem := mustMemLimiter(t, ls)
			red := mustRedisLimiter(t, rdb, Options{Prefix: fmt.Sprintf("same%d:", ci), Timeout: patient, callerClock: true}, "", ls)
			capacity := capacityOf(ls)
			r := rand.New(rand.NewPCG(uint64(ci), 13))
			now := t0
			var allowed, rejected, delayed int
			var last stubserver.Decision
			for i := range 400 {
				switch x := r.IntN(8); {
				case x == 0 && last.RetryIn > 0:
					// Exactly when the last rejection said to come back:
					// the edges of windows and logs.
					now = now.Add(last.RetryIn).Add(time.Microsecond - 1).Truncate(time.Microsecond)
				case x == 1:
					now = now.Add(ls[r.IntN(len(ls))].Resolved().Per) // a whole window
				default:
					now = now.Add(gap(r, tc.scale, tc.back))
				}
				c := stubserver.Charge{Cost: 1}
				switch x := r.IntN(20); {
				case x == 0:
					c.Cost = capacity + 1
				case x < 4:
					c.Cost = 1 + r.IntN(capacity)
				}
				for j, l := range ls {
					if l.Key != "" && l.Key != stubserver.KeyGlobal {
						c.Keys[j] = string(rune('a' + r.IntN(3)))
					}
				}
				want, err := mem.Take(context.Background(), c, now)
				if err != nil {
					t.Fatal(err)
				}
				got, err := red.Take(context.Background(), c, now)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("step %d (at +%v, cost %d, keys %q):\nredis  %+v\nmemory %+v", i, now.Sub(t0), c.Cost, c.Keys[:len(ls)], got, want)
				}
				last = got
				switch {
				case !got.Allowed:
					rejected++
				case got.Delay > 0:
					delayed++
					allowed++
				default:
					allowed++
				}
			}
			if allowed == 0 || rejected == 0 {
				t.Errorf("%d allowed, %d rejected: the sequence does not exercise both", allowed, rejected)
			}
			for _, l := range ls {
				if l.Mode == stubserver.ModeShape && delayed == 0 {
					t.Errorf("no request was delayed by the shaper %q", l.Name)
				}
			}
		})
	}
}

// capacityOf is the most units a request can cost and fit every limit.
func capacityOf(ls []stubserver.Limit) int {
	c := 1 << 30
	for _, l := range ls {
		r := l.Resolved()
		n := r.Burst
		if r.Algorithm != tb && r.Algorithm != lk {
			n = max(1, int(r.Limit))
		}
		c = min(c, n)
	}
	return c
}

// gap draws the time to the next request, whole µs: none, a little, about
// scale or a few times it, and (back) sometimes a step back.
func gap(r *rand.Rand, scale time.Duration, back bool) time.Duration {
	var d time.Duration
	switch x := r.IntN(10); {
	case x < 2:
	case x < 5:
		d = time.Duration(r.Int64N(int64(scale) / 4))
	case x < 9:
		d = time.Duration(r.Int64N(2 * int64(scale)))
	default:
		d = time.Duration(r.Int64N(12 * int64(scale)))
	}
	if back && r.IntN(10) == 0 {
		d = -d
	}
	return d.Truncate(time.Microsecond)
}

// TestTwoLimitersShareOneQuota: two Limiters on one Redis, as two stubs
// make them, with Redis's own clock: a quota of 30 an hour (and a token
// bucket that refills once an hour) allows 30 requests in all, charged in
// turn by both; another tier, and another prefix, count apart.
func TestTwoLimitersShareOneQuota(t *testing.T) {
	srv, rdb := newRedis(t)
	other := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer other.Close()
	ls := stubserver.Named([]stubserver.Limit{
		{Name: "bucket", Algorithm: tb, Limit: 1, Per: time.Hour, Burst: 40},
		{Name: "log", Algorithm: swl, Limit: 30, Per: time.Hour},
		{Name: "client", Algorithm: fw, Limit: 1000, Per: time.Hour, Key: stubserver.KeyClient},
	})
	o := Options{Prefix: "share:", Timeout: patient}
	a := mustRedisLimiter(t, rdb, o, "gold", ls)
	b := mustRedisLimiter(t, other, o, "gold", ls)
	allowed := 0
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g, lim := range []*Limiter{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				d, err := lim.Take(context.Background(), stubserver.Charge{Cost: 1, Keys: [8]string{"", "", fmt.Sprint(g, i%3)}}, time.Time{})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if allowed != 30 {
		t.Errorf("two limiters allowed %d of 100 requests; want the quota's 30", allowed)
	}
	d := take(t, b, time.Time{}, 1)
	if d.Allowed || d.Rejected != 1 || d.Limits[1].Remaining != 0 || d.Limits[0].Remaining != 10 {
		t.Errorf("after the quota: %+v; want rejected by the hourly log, 10 tokens left (40 - 30 charged)", d)
	}
	for name, lim := range map[string]*Limiter{
		"tier silver":  mustRedisLimiter(t, rdb, o, "silver", ls),
		"prefix other": mustRedisLimiter(t, rdb, Options{Prefix: "other:", Timeout: patient}, "gold", ls),
	} {
		if d := take(t, lim, time.Time{}, 1); !d.Allowed || d.Limits[1].Remaining != 29 {
			t.Errorf("%s: %+v; want allowed with 29 left: its own counts", name, d)
		}
	}
}

// TestRedisClock: without the test clock the script reads Redis's TIME:
// a caller's clock in 1970 changes nothing, and a fixed window's reset is
// the time to the next hour by the host's clock (Redis runs on it).
func TestRedisClock(t *testing.T) {
	_, rdb := newRedis(t)
	lim := mustRedisLimiter(t, rdb, Options{Timeout: patient}, "", []stubserver.Limit{{Algorithm: fw, Limit: 5, Per: time.Hour}})
	before := time.Now()
	d := take(t, lim, time.Unix(0, 0), 1)
	after := time.Now()
	hi := before.Truncate(time.Hour).Add(time.Hour).Sub(before)
	lo := after.Truncate(time.Hour).Add(time.Hour).Sub(after)
	if lo > hi { // an hour began between the two reads
		lo = 0
	}
	if !d.Allowed || d.Limits[0].Reset < lo || d.Limits[0].Reset > hi || d.Limits[0].Remaining != 4 {
		t.Errorf("decision %+v; want allowed, 4 left, reset in [%v, %v] (the next hour by the host's clock)", d, lo, hi)
	}
}

// TestKeysAndTTL: each limit keeps its state under PREFIX TIER/NAME/ALG/KEY
// and expires about twice its window (or refill time) after it was
// written.
func TestKeysAndTTL(t *testing.T) {
	_, rdb := newRedis(t)
	ls := stubserver.Named([]stubserver.Limit{
		{Name: "tb", Algorithm: tb, Limit: 10, Per: sec, Burst: 30},                                          // refills 30 in 3 s
		{Name: "fw", Algorithm: fw, Limit: 10, Per: time.Minute, Key: stubserver.KeyClient},                  // 1 m
		{Name: "sw", Algorithm: sw, Limit: 10, Per: 10 * sec},                                                // 10 s
		{Name: "log", Algorithm: swl, Limit: 10, Per: 5 * sec},                                               // 5 s
		{Name: "lk", Algorithm: lk, Limit: 2, Per: sec, Burst: 4},                                            // drains 4 in 2 s
		{Name: "sh", Algorithm: lk, Mode: stubserver.ModeShape, Limit: 2, Per: sec, MaxDelay: 3 * sec},       // 1 s + 3 s
		{Name: "tiny", Algorithm: fw, Limit: 10, Per: 10 * time.Millisecond, Key: stubserver.KeyEndpoint},    // at least 1 s
		{Name: "day", Algorithm: tb, Limit: 100, Per: 24 * time.Hour, Burst: 100, Key: stubserver.KeyAPIKey}, // 1 d
	})
	lim := mustRedisLimiter(t, rdb, Options{Prefix: "rl:", Timeout: patient}, "pro", ls)
	take(t, lim, time.Time{}, 1, "", "c1", "", "", "", "", "GET /x", "key/with/slashes")
	want := map[string]time.Duration{
		"rl:pro/tb/token-bucket/":                  6 * sec,
		"rl:pro/fw/fixed-window/c1":                2 * time.Minute,
		"rl:pro/sw/sliding-window/":                20 * sec,
		"rl:pro/log/sliding-window-log/":           10 * sec,
		"rl:pro/lk/leaky-bucket/":                  4 * sec,
		"rl:pro/sh/leaky-bucket/":                  8 * sec,
		"rl:pro/tiny/fixed-window/GET /x":          sec,
		"rl:pro/day/token-bucket/key/with/slashes": 48 * time.Hour,
	}
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(want) {
		t.Errorf("keys %q; want %d", keys, len(want))
	}
	for i, l := range ls {
		k := lim.Key(i, map[int]string{1: "c1", 6: "GET /x", 7: "key/with/slashes"}[i])
		ttl, ok := want[k]
		if !ok {
			t.Errorf("limit %s: Key = %q; not a key we expect", l.Name, k)
			continue
		}
		got, err := rdb.PTTL(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got > ttl+time.Millisecond || got < ttl-5*sec {
			t.Errorf("limit %s: PTTL %q = %v; want about %v", l.Name, k, got, ttl)
		}
	}
}

// TestScriptFlushed: a Redis that lost its script cache (restarted,
// SCRIPT FLUSH) is sent the script again (EVAL on NOSCRIPT).
func TestScriptFlushed(t *testing.T) {
	_, rdb := newRedis(t)
	lim := mustRedisLimiter(t, rdb, Options{Timeout: patient}, "", []stubserver.Limit{{Limit: 1, Per: time.Hour}})
	if d := take(t, lim, time.Time{}, 1); !d.Allowed {
		t.Fatalf("first request: %+v; want allowed", d)
	}
	if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if d := take(t, lim, time.Time{}, 1); d.Allowed || d.RetryIn < 59*time.Minute {
		t.Errorf("after SCRIPT FLUSH: %+v; want rejected for about an hour (the state survived, the script was sent again)", d)
	}
}

// TestRedisDown: a Take fails within about the Timeout when Redis is
// stopped, and when it is too slow (CLIENT PAUSE), whether or not the
// client heeds the context's deadline itself.
func TestRedisDown(t *testing.T) {
	for _, heeds := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", heeds), func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: heeds, MaxRetries: -1})
			defer rdb.Close()
			const timeout = 100 * time.Millisecond
			lim := mustRedisLimiter(t, rdb, Options{Timeout: timeout}, "", []stubserver.Limit{{Limit: 100, Per: sec}})
			if _, err := lim.Take(context.Background(), stubserver.Charge{Cost: 1}, time.Time{}); err != nil {
				t.Fatalf("with Redis up: %v", err)
			}

			// Slow: Redis holds every client's commands for 2 s.
			if err := rdb.Do(context.Background(), "CLIENT", "PAUSE", "2000").Err(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err := lim.Take(context.Background(), stubserver.Charge{Cost: 1}, time.Time{})
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "stubredis: ") {
				t.Errorf("with Redis paused: err = %v; want a stubredis error wrapping context.DeadlineExceeded", err)
			}
			if took > timeout+time.Second {
				t.Errorf("with Redis paused: Take took %v; want about the Timeout %v, well before the 2 s pause ends", took, timeout)
			}

			srv.Stop()
			start = time.Now()
			_, err = lim.Take(context.Background(), stubserver.Charge{Cost: 1}, time.Time{})
			took = time.Since(start)
			if err == nil || !strings.HasPrefix(err.Error(), "stubredis: ") {
				t.Errorf("with Redis stopped: err = %v; want a stubredis error", err)
			}
			if took > timeout+time.Second {
				t.Errorf("with Redis stopped: Take took %v; want at most about the Timeout %v", took, timeout)
			}
		})
	}
}

// TestNewLimiterRefuses: what New cannot serve is an error at once.
func TestNewLimiterRefuses(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	for _, tt := range []struct {
		name   string
		rdb    *redis.Client
		limits []stubserver.Limit
		want   string
	}{
		{"nil client", nil, []stubserver.Limit{{Limit: 1}}, "nil Redis client"},
		{"no limits", rdb, nil, "no limits"},
		{"bad limit", rdb, []stubserver.Limit{{Limit: -1}}, "limit must be a positive number"},
		{"too many", rdb, make([]stubserver.Limit, stubserver.MaxLimits+1), "at most 8 may be layered"},
		{"window below µs", rdb, []stubserver.Limit{{Algorithm: fw, Limit: 1, Per: 1500 * time.Nanosecond}}, "whole microseconds"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewLimiter(tt.rdb, Options{}, stubserver.LimiterSpec{Limits: tt.limits})
			if err == nil || !strings.HasPrefix(err.Error(), "stubredis: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewLimiter = %v; want a stubredis error with %q", err, tt.want)
			}
		})
	}
	// A token bucket's window only sets its rate: any will do.
	if _, err := NewLimiter(rdb, Options{}, stubserver.LimiterSpec{Limits: []stubserver.Limit{{Limit: 1, Per: 1500 * time.Nanosecond}}}); err != nil {
		t.Errorf("token bucket of 1/1.5µs: %v; want it accepted", err)
	}
}

// TestDecisionRefusesBadReplies: a reply of the wrong shape is an error,
// not a decision.
func TestDecisionRefusesBadReplies(t *testing.T) {
	lim := &Limiter{layers: make([]layer, 2)}
	for _, v := range [][]int64{
		nil,
		{1, 1, 0, 0, 5, 0},                 // one limit short
		{2, 1, 0, 0, 5, 0, 1, 0, 0, 5, 0},  // allowed 2
		{1, 0, 10, 0, 0, 0, 1, 0, 0, 5, 0}, // allowed, yet a limit had no room
		{0, 1, 0, 0, 5, 0, 1, 0, 0, 5, 0},  // rejected by no limit
		{0, 0, -1, 0, 0, 0, 1, 0, 0, 5, 0}, // negative wait
		{1, 1, 0, 0, -5, 0, 1, 0, 0, 5, 0}, // negative remaining
	} {
		if d, err := lim.decision(v); err == nil {
			t.Errorf("decision(%v) = %+v; want an error", v, d)
		}
	}
	d, err := lim.decision([]int64{0, 1, 0, 0, 3, 9, 0, 7, 0, 4, 8})
	if err != nil || d.Allowed || d.Rejected != 1 || d.RetryIn != 7 || d.Limits[1].Remaining != 0 || d.Limits[0].Remaining != 3 {
		t.Errorf("decision of a rejection by limit 1 = %+v, %v", d, err)
	}
}
