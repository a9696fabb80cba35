package stubredis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/stubserver"
)

// Defaults for the zero fields of Options.
const (
	// DefaultPrefix starts every Redis key a Limiter writes.
	DefaultPrefix = "retrylab:quota:"
	// DefaultTimeout bounds each Take's Redis call: a loopback or
	// same-zone round trip takes well under a millisecond, so a call this
	// slow means Redis is in trouble, and the quota's OnError is better
	// than a stub that stalls with it.
	DefaultTimeout = 50 * time.Millisecond
)

// Options configure the Limiters of one stub. Stubs that share a quota
// must use the same Prefix (and the same limits, under the same tier and
// limit names).
type Options struct {
	// Prefix starts every key (zero: DefaultPrefix). Give each scenario
	// its own, so that two on one Redis do not share counts.
	Prefix string
	// Timeout bounds each Redis call (zero or negative: DefaultTimeout); a
	// call that takes longer fails with an error wrapping
	// context.DeadlineExceeded.
	Timeout time.Duration

	// callerClock makes the script use Take's now instead of Redis's
	// TIME: tests only, so that a Limiter's decisions can be compared
	// with the memory limiter's at the same instants.
	callerClock bool
}

// effective returns o with its defaults applied.
func (o Options) effective() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

//go:embed quota.lua
var quotaLua string

// quotaScript is the script, hashed once: EVALSHA, then EVAL on NOSCRIPT
// (a new or restarted server).
var quotaScript = redis.NewScript(quotaLua)

// New returns the stubserver.Options.NewLimiter that keeps every limit of
// a stub's quota in rdb under o: NewLimiter for each spec. The spec's
// Backend is not read (rdb is the backend). It does not contact Redis.
func New(rdb *redis.Client, o Options) func(stubserver.LimiterSpec) (stubserver.Limiter, error) {
	return func(spec stubserver.LimiterSpec) (stubserver.Limiter, error) {
		return NewLimiter(rdb, o, spec)
	}
}

// A Limiter is a stubserver.Limiter whose state lives in Redis, so that
// every stub that makes one with the same Options and spec enforces one
// quota. It is safe for concurrent use.
type Limiter struct {
	rdb    *redis.Client
	o      Options
	inline bool // rdb heeds the context's deadline: call it in the caller's goroutine
	layers []layer
	args   []any // the limits' ARGV, after the cost and the clock
}

// layer is one limit as the Limiter reports it, and its keys' prefix.
type layer struct {
	prefix string // every key of this limit starts so
	n      int    // the published limit
	per    time.Duration
}

// NewLimiter returns the Limiter of spec's limits in rdb under o. It fails
// for a nil rdb, limits the memory limiter would refuse, and a
// fixed-window or sliding-window limit whose window is not a whole number
// of microseconds (Redis's clock counts µs).
func NewLimiter(rdb *redis.Client, o Options, spec stubserver.LimiterSpec) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("stubredis: nil Redis client")
	}
	if len(spec.Limits) == 0 {
		return nil, errors.New("stubredis: no limits")
	}
	if err := (stubserver.Config{Quota: &stubserver.Quota{Limits: spec.Limits}}).Validate(); err != nil {
		return nil, fmt.Errorf("stubredis: %w", err)
	}
	o = o.effective()
	l := &Limiter{rdb: rdb, o: o, inline: rdb.Options().ContextTimeoutEnabled}
	for i, raw := range stubserver.Named(spec.Limits) {
		lim := raw.Resolved()
		// The memory limiter's figures (stubserver.NewMemoryLimiter),
		// computed the same way so that both decide alike.
		per := lim.Per
		n := max(1, int(math.Floor(lim.Limit)))
		rate := lim.Limit / per.Seconds()
		perUnit := float64(time.Second) / rate
		var alg string
		var a, b, c, d string
		var ttl time.Duration
		switch lim.Algorithm {
		case stubserver.AlgTokenBucket:
			alg = "t"
			a, b, c, d = fmtFloat(rate), strconv.Itoa(lim.Burst), fmtFloat(perUnit), fmtInt(int64(per))
			ttl = fillTime(lim.Burst, perUnit)
		case stubserver.AlgFixedWindow, stubserver.AlgSlidingWindow:
			if per%time.Microsecond != 0 {
				return nil, fmt.Errorf("stubredis: limits[%d] %q: a %s window must be whole microseconds (Redis's clock), got %v", i, lim.Name, lim.Algorithm, per)
			}
			alg = "f"
			if lim.Algorithm == stubserver.AlgSlidingWindow {
				alg = "s"
			}
			a, b, c = fmtInt(per.Microseconds()), strconv.Itoa(n), fmtInt(int64(per))
			ttl = twice(per)
		case stubserver.AlgSlidingWindowLog:
			alg = "l"
			a, b = fmtInt(int64(per)), strconv.Itoa(n)
			ttl = twice(per)
		case stubserver.AlgLeakyBucket:
			alg = "m"
			a, b = fmtFloat(perUnit), strconv.Itoa(lim.Burst)
			ttl = fillTime(lim.Burst, perUnit)
			if lim.Mode == stubserver.ModeShape {
				alg = "h"
				c = fmtInt(int64(lim.MaxDelay))
				ttl = min(ttl, math.MaxInt64/2) + min(twice(lim.MaxDelay), math.MaxInt64/2)
			}
		default:
			return nil, fmt.Errorf("stubredis: limits[%d] %q: unknown algorithm %q", i, lim.Name, lim.Algorithm)
		}
		// At least a second, so that short windows do not churn keys.
		ttlMS := max(1000, int64(ttl/time.Millisecond)+1)
		l.args = append(l.args, alg, a, b, c, d, fmtInt(ttlMS))
		l.layers = append(l.layers, layer{
			prefix: o.Prefix + spec.Tier + "/" + lim.Name + "/" + lim.Algorithm + "/",
			n:      n,
			per:    per,
		})
	}
	return l, nil
}

// twice is 2d, saturating.
func twice(d time.Duration) time.Duration {
	if d > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return 2 * d
}

// fillTime is twice the time burst units take to refill (or drain) at
// perUnit ns each: a key idle that long is whole again, so letting it
// expire loses nothing.
func fillTime(burst int, perUnit float64) time.Duration {
	d := 2 * float64(burst) * perUnit
	if d >= float64(math.MaxInt64/2) {
		return math.MaxInt64 / 2
	}
	return time.Duration(math.Ceil(d))
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
func fmtInt(i int64) string     { return strconv.FormatInt(i, 10) }

// Key returns the Redis key of limit i's state (0 <= i < the number of
// limits) for key, a Charge's Keys[i]: Prefix, the tier, the limit's name
// and algorithm, and key, joined by "/" after the prefix.
func (l *Limiter) Key(i int, key string) string { return l.layers[i].prefix + key }

// Take implements stubserver.Limiter with one script call (EVALSHA, EVAL
// when Redis has not cached the script) that checks every limit and then
// charges all of them or none, at the instant Redis's TIME reads; now is
// not used. It fails when Redis fails, answers something unexpected, or
// does not answer within Options.Timeout (the error then wraps
// context.DeadlineExceeded); a call that timed out after Redis received
// it may still have charged the limits.
func (l *Limiter) Take(ctx context.Context, c stubserver.Charge, now time.Time) (stubserver.Decision, error) {
	n := len(l.layers)
	keys := make([]string, n)
	for i := range l.layers {
		keys[i] = l.layers[i].prefix + c.Keys[i]
	}
	args := make([]any, 2+len(l.args))
	args[0] = strconv.Itoa(max(1, c.Cost))
	args[1] = ""
	if l.o.callerClock {
		args[1] = fmtInt(now.UnixMicro())
	}
	copy(args[2:], l.args)
	v, err := l.eval(ctx, keys, args)
	if err != nil {
		return stubserver.Decision{}, err
	}
	return l.decision(v)
}

// Health implements stubserver.HealthChecker with a PING, bounded by ctx
// (stubserver.HealthTimeout on /healthz) whether or not the Redis client
// heeds its deadline.
func (l *Limiter) Health(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- l.rdb.Ping(ctx).Err() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("stubredis: PING: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stubredis: PING: no answer: %w", ctx.Err())
	}
}

type evalResult struct {
	v   []int64
	err error
}

// eval runs the script, giving up after Options.Timeout whether or not
// the Redis client heeds the context's deadline: if it does not
// (ContextTimeoutEnabled unset), the call runs in a goroutine of its own,
// left to finish after the Timeout, its answer dropped.
func (l *Limiter) eval(ctx context.Context, keys []string, args []any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
	defer cancel()
	run := func() evalResult {
		v, err := quotaScript.Run(ctx, l.rdb, keys, args...).Int64Slice()
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
	var ne net.Error
	switch {
	case r.err == nil:
		return r.v, nil
	case errors.Is(ctx.Err(), context.Canceled):
		return nil, fmt.Errorf("stubredis: quota %q: %w", keys[0], ctx.Err())
	case ctx.Err() != nil || errors.As(r.err, &ne) && ne.Timeout():
		// The connection's deadline, set from ctx's, may fire before ctx
		// is done.
		return nil, fmt.Errorf("stubredis: quota %q: no answer within %v: %w", keys[0], l.o.Timeout, context.DeadlineExceeded)
	}
	return nil, fmt.Errorf("stubredis: quota %q: %w", keys[0], r.err)
}

// decision reads the script's answer: {allowed, then per limit ok, wait,
// delay, remaining, reset}.
func (l *Limiter) decision(v []int64) (stubserver.Decision, error) {
	n := len(l.layers)
	bad := func() (stubserver.Decision, error) {
		return stubserver.Decision{}, fmt.Errorf("stubredis: unexpected reply %v from the quota script (%d limits)", v, n)
	}
	if len(v) != 1+5*n || v[0] < 0 || v[0] > 1 {
		return bad()
	}
	d := stubserver.Decision{Allowed: v[0] == 1, Rejected: -1, N: n}
	for i := range n {
		r := v[1+5*i : 6+5*i]
		ok, wait, delay, rem, reset := r[0], time.Duration(r[1]), time.Duration(r[2]), r[3], time.Duration(r[4])
		if ok < 0 || ok > 1 || wait < 0 || delay < 0 || rem < 0 || reset < 0 || (ok == 0 && d.Allowed) {
			return bad()
		}
		s := &d.Limits[i]
		s.Limit, s.Window = l.layers[i].n, l.layers[i].per
		s.Remaining, s.Reset = int(min(rem, math.MaxInt32)), reset
		if d.Allowed {
			d.Delay = max(d.Delay, delay)
		}
		if ok == 0 {
			s.RetryIn = wait
			if d.Rejected < 0 || wait > d.RetryIn {
				d.Rejected, d.RetryIn = i, wait
			}
		}
		if s.RetryIn > 0 {
			s.Remaining = 0
		}
	}
	if !d.Allowed && d.Rejected < 0 {
		return bad()
	}
	return d, nil
}
