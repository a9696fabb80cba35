package clientredis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/retrylab/retrylab/client"
)

// Defaults for the zero fields of Options.
const (
	// DefaultPrefix starts every Redis key the Limiter writes.
	DefaultPrefix = "retrylab:bucket:"
	// DefaultTimeout bounds each Redis call: a loopback or same-zone
	// round trip takes well under a millisecond, so a call this slow means
	// Redis is in trouble, and pacing locally is better than waiting on it.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultMaxWait bounds a reservation's wait: the client's default
	// budget, past which the client would not start the wait anyway.
	DefaultMaxWait = client.DefaultBudget
)

// ProbeInterval is how often, at most, a Limiter that fell back tries
// Redis again: the first call at least ProbeInterval after the last failure
// asks Redis; the others in between pace locally without trying.
const ProbeInterval = time.Second

// ErrWaitTooLong is the Reason of a call whose permit would come after
// Options.MaxWait: the quota is spent that far ahead. Nothing is reserved.
var ErrWaitTooLong = errors.New("clientredis: wait too long")

// Options configure a Limiter. Every zero field but Rate means the
// documented default. Processes that share a quota must use the same Rate,
// Burst and Prefix, and the same quota keys (client.Config.Key).
type Options struct {
	// Rate is the quota's rate in permits per second per key, for all the
	// processes together. It must be positive; the seeds' practice is about
	// 80% of the published quota (client.DefaultQuotaShare).
	Rate float64
	// Burst is the bucket's capacity (zero or negative: client.DefaultBurst).
	Burst int
	// Prefix starts the Redis key of every quota key (zero: DefaultPrefix).
	Prefix string
	// Processes is how many processes share the quota, N: while Redis does
	// not answer, each paces at Rate/N per key, burst max(1, Burst/N), so
	// the fleet stays near the quota without it (zero or negative: 1).
	Processes int
	// Timeout bounds each Redis call (zero or negative: DefaultTimeout). A
	// call that fails or takes longer makes the Limiter fall back.
	//
	// go-redis applies a context's deadline to its reads and writes only
	// when its options set ContextTimeoutEnabled. With that set, the
	// Limiter runs each call in the caller's goroutine; without it, it runs
	// the call in a goroutine of its own, stops waiting after Timeout and
	// leaves the call to finish (by the client's ReadTimeout, 5 s by
	// default), its answer dropped: a permit reserved by such a late answer
	// is lost, which errs under the quota. The hand-off costs each call
	// some tens of µs (BENCHMARKS.md): set ContextTimeoutEnabled.
	Timeout time.Duration
	// MaxWait bounds the wait of a reservation (zero or negative:
	// DefaultMaxWait). A permit further ahead is not reserved: Reserve
	// fails with ErrWaitTooLong, so the quota's debt in Redis stays within
	// Rate × MaxWait permits however many callers queue.
	MaxWait time.Duration
	// Observer, if set, is told when the Limiter falls back to local pacing
	// and when it recovers (client.LimiterObserver; clientprom's Observer is
	// one): give it the Transport's Config.Observer.
	Observer client.LimiterObserver
}

// Limiter is a client.Limiter whose token buckets, one per quota key, live
// in Redis, so every process that uses one with the same Options paces
// under one quota. Make one with New; it is safe for concurrent use.
//
// Each Reserve runs one Lua script (EVALSHA, and EVAL when the server has
// not cached it) that reads the server's clock, refills the bucket, takes a
// permit and returns the wait until it, like x/time/rate's Reserve: the
// bucket may go negative, up to Rate × MaxWait permits, so that callers
// queue in order. The cancel function Reserve returns gives the permit back
// (best effort: one more Redis call, skipped while fallen back, and only
// before the permit's instant).
//
// When a Redis call fails or times out, the Limiter falls back: it paces
// each key with a local bucket at Rate/Processes, tells Options.Observer
// once, and returns no error to the caller. While fallen back, at most one
// call per ProbeInterval tries Redis again; the first that succeeds
// recovers (the Observer is told) and takes its permit from Redis.
type Limiter struct {
	rdb    redis.Scripter
	o      Options
	inline bool // rdb heeds the context's deadline: call it in the caller's goroutine

	rateArg, burstArg, maxWaitArg string
	localRate                     rate.Limit
	localBurst                    int

	mu    sync.Mutex
	local map[string]*localKey

	down      atomic.Bool // pacing locally
	stateMu   sync.Mutex  // guards the fields below and down's changes
	probing   bool        // a call is trying Redis while down
	nextProbe time.Time   // no probe before
}

var _ client.Limiter = (*Limiter)(nil)

// localKey is what a Limiter keeps of a key in its process.
type localKey struct {
	// until is the latest instant of a permit this process took from
	// Redis for the key: a fallback gives no local permit before it, so
	// the process does not add local permits to the Redis permits its
	// callers still wait for.
	until time.Time
	lim   *rate.Limiter // the fallback bucket, made at its first use
}

//go:embed bucket.lua
var bucketLua string

// bucket is the script, hashed once: EVALSHA, then EVAL on NOSCRIPT (a new
// or restarted server).
var bucket = redis.NewScript(bucketLua)

// New returns a Limiter that keeps its buckets in rdb (a *redis.Client,
// *redis.ClusterClient or *redis.Ring) under o. It does not contact Redis.
func New(rdb redis.Scripter, o Options) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("clientredis: New: nil Redis client")
	}
	if !(o.Rate > 0) || math.IsInf(o.Rate, 0) {
		return nil, fmt.Errorf("clientredis: New: Rate must be a positive number of permits per second (got %v)", o.Rate)
	}
	o = o.effective()
	l := &Limiter{
		rdb:        rdb,
		o:          o,
		inline:     heedsDeadline(rdb),
		rateArg:    strconv.FormatFloat(o.Rate, 'g', -1, 64),
		burstArg:   strconv.Itoa(o.Burst),
		maxWaitArg: strconv.FormatInt(o.MaxWait.Microseconds(), 10),
		localRate:  rate.Limit(o.Rate / float64(o.Processes)),
		localBurst: max(1, o.Burst/o.Processes),
		local:      make(map[string]*localKey),
	}
	return l, nil
}

// effective returns o with its defaults applied.
func (o Options) effective() Options {
	if o.Burst <= 0 {
		o.Burst = client.DefaultBurst
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Processes <= 0 {
		o.Processes = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	return o
}

// heedsDeadline reports whether rdb applies a context's deadline to every
// step of a call: go-redis's clients with ContextTimeoutEnabled.
func heedsDeadline(rdb redis.Scripter) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Options returns the Limiter's options, defaults applied.
func (l *Limiter) Options() Options { return l.o }

// Key returns the Redis key of a quota key.
func (l *Limiter) Key(key string) string { return l.o.Prefix + key }

// FellBack reports whether the Limiter is pacing locally: a Redis call
// failed and no probe has succeeded since.
func (l *Limiter) FellBack() bool { return l.down.Load() }

// Reserve implements client.Limiter: it takes a permit for key from Redis,
// or from the key's local bucket while fallen back, and returns the wait
// until it and a function that gives it back. It fails only when ctx ends
// during a Redis call (with ctx's error) and with ErrWaitTooLong; a Redis
// failure is never the caller's error.
func (l *Limiter) Reserve(ctx context.Context, key string, now time.Time) (time.Duration, func(), error) {
	probe := false
	if l.down.Load() {
		if !l.startProbe(now) {
			return l.reserveLocal(key, now)
		}
		probe = true
	}
	r, err := l.take(ctx, key)
	if err != nil {
		if ctx.Err() != nil { // the caller gave up, not Redis
			if probe {
				l.endProbe()
			}
			return 0, nil, ctx.Err()
		}
		l.fail(key, err, probe)
		return l.reserveLocal(key, now)
	}
	if probe {
		l.recover(key)
	}
	if !r.done {
		return r.wait, nil, l.tooLong(key, r.wait)
	}
	l.tookFromRedis(key, now.Add(r.wait))
	at := strconv.FormatInt(r.at, 10)
	return r.wait, func() { l.giveBack(key, at) }, nil
}

// tookFromRedis notes a permit's instant taken from Redis for key.
func (l *Limiter) tookFromRedis(key string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lk := l.local[key]
	if lk == nil {
		lk = &localKey{}
		l.local[key] = lk
	}
	if at.After(lk.until) {
		lk.until = at
	}
}

// reply is the script's answer.
type reply struct {
	done bool
	wait time.Duration
	at   int64 // the permit's instant, µs of the server's clock
}

// take runs the script's take for key.
func (l *Limiter) take(ctx context.Context, key string) (reply, error) {
	v, err := l.eval(ctx, key, "take", l.maxWaitArg)
	if err != nil {
		return reply{}, err
	}
	return parseReply(v)
}

// parseReply checks the script's answer: three integers, a flag and a
// non-negative wait.
func parseReply(v []int64) (reply, error) {
	if len(v) != 3 || v[0] < 0 || v[0] > 1 || v[1] < 0 || v[1] > math.MaxInt64/int64(time.Microsecond) {
		return reply{}, fmt.Errorf("clientredis: unexpected reply %v from the bucket script", v)
	}
	return reply{done: v[0] == 1, wait: time.Duration(v[1]) * time.Microsecond, at: v[2]}, nil
}

// giveBack gives a permit reserved for the instant at back, unless the
// Limiter has fallen back since (Redis is not answering).
func (l *Limiter) giveBack(key, at string) {
	if l.down.Load() {
		return
	}
	l.eval(context.Background(), key, "give", at) // best effort
}

type evalResult struct {
	v   []int64
	err error
}

// eval runs the script on key's bucket, giving up after Options.Timeout
// whether or not the Redis client heeds the context's deadline: if it does
// not, the call runs in a goroutine of its own, left to finish after the
// Timeout, its answer dropped.
func (l *Limiter) eval(ctx context.Context, key, op, arg string) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
	defer cancel()
	run := func() evalResult {
		v, err := bucket.Run(ctx, l.rdb, []string{l.o.Prefix + key}, l.rateArg, l.burstArg, op, arg).Int64Slice()
		return evalResult{v, err}
	}
	var r evalResult
	if l.inline {
		r = run()
	} else {
		done := make(chan evalResult, 1)
		go func() { done <- run() }()
		select {
		case r = <-done:
		case <-ctx.Done():
			r.err = ctx.Err()
		}
	}
	switch {
	case r.err == nil:
		return r.v, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("clientredis: bucket %q: no answer within %v: %w", l.o.Prefix+key, l.o.Timeout, ctx.Err())
	}
	return nil, fmt.Errorf("clientredis: bucket %q: %w", l.o.Prefix+key, r.err)
}

// reserveLocal takes a permit from key's local bucket, not before the last
// permit this process took from Redis for it.
func (l *Limiter) reserveLocal(key string, now time.Time) (time.Duration, func(), error) {
	l.mu.Lock()
	lk := l.local[key]
	if lk == nil {
		lk = &localKey{}
		l.local[key] = lk
	}
	if lk.lim == nil {
		lk.lim = rate.NewLimiter(l.localRate, l.localBurst)
	}
	lim, from := lk.lim, now
	if lk.until.After(from) {
		from = lk.until
	}
	l.mu.Unlock()
	res := lim.ReserveN(from, 1) // always OK: the burst is at least 1
	wait := res.DelayFrom(now)
	if wait > l.o.MaxWait {
		res.CancelAt(now)
		return wait, nil, l.tooLong(key, wait)
	}
	return wait, func() { res.CancelAt(time.Now()) }, nil
}

func (l *Limiter) tooLong(key string, wait time.Duration) error {
	return fmt.Errorf("%w: key %q would wait %v, past MaxWait %v", ErrWaitTooLong, key, wait, l.o.MaxWait)
}

// startProbe reports whether this call, while fallen back, may try Redis:
// no other call is trying and ProbeInterval has passed since the last try.
func (l *Limiter) startProbe(now time.Time) bool {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if l.probing || now.Before(l.nextProbe) {
		return false
	}
	l.probing = true
	return true
}

// endProbe ends a probe that neither failed nor succeeded (the caller's
// context ended): the next call may try at once.
func (l *Limiter) endProbe() {
	l.stateMu.Lock()
	l.probing = false
	l.stateMu.Unlock()
}

// fail records a failed Redis call: the first one falls back and tells
// the Observer; a failed probe puts the next one ProbeInterval ahead.
func (l *Limiter) fail(key string, err error, probe bool) {
	l.stateMu.Lock()
	first := false
	switch {
	case probe:
		l.probing = false
		l.nextProbe = time.Now().Add(ProbeInterval)
	case !l.down.Load():
		first = true
		l.down.Store(true)
		l.nextProbe = time.Now().Add(ProbeInterval)
	}
	l.stateMu.Unlock()
	if first && l.o.Observer != nil {
		l.o.Observer.LimiterFallback(client.LimiterEvent{Key: key, FellBack: true, Err: err, Rate: float64(l.localRate)})
	}
}

// recover ends the fallback after a successful probe.
func (l *Limiter) recover(key string) {
	l.stateMu.Lock()
	l.probing = false
	l.down.Store(false)
	l.stateMu.Unlock()
	if l.o.Observer != nil {
		l.o.Observer.LimiterFallback(client.LimiterEvent{Key: key})
	}
}
