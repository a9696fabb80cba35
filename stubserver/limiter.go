package stubserver

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// A Limiter enforces one list of layered limits (a quota's, or one tier's)
// for many keys. Take is the single call made per request in a quota
// phase: it decides and charges every limit at once, so a remote backend (a
// Redis script) can implement it with one round trip and several stub
// instances share one quota.
type Limiter interface {
	// Take charges c.Cost units to every limit, limit i under key
	// c.Keys[i], if every limit has room at now, and charges nothing
	// otherwise; it reports the state after the decision. now is the
	// caller's clock; a remote backend may use its own. An error (backend
	// unreachable or slow) charges nothing; the Server then follows the
	// quota's OnError.
	Take(ctx context.Context, c Charge, now time.Time) (Decision, error)
}

// Charge is what one request asks of a Limiter.
type Charge struct {
	// Keys[i] is the key limit i counts this request under (its Key:
	// "" for global, the client id, the API key or the endpoint).
	Keys [MaxLimits]string
	Cost int // units, at least 1
}

// LimiterSpec is what a Limiter enforces: Options.NewLimiter builds one
// per spec, one for the quota's limits or one per tier.
type LimiterSpec struct {
	// Tier is the tier's name; "" for a quota without tiers. A shared
	// backend keeps each tier's state apart under it.
	Tier string
	// Limits are the layered limits, each Name set (Named).
	Limits []Limit
	// Backend is the quota's Backend ("" or "memory", or a redis:// URL).
	Backend string
}

// Decision is a Limiter's answer for one request.
type Decision struct {
	Allowed bool
	// Delay is how long a shaping limit holds an allowed request before
	// it is answered (0 for meters).
	Delay time.Duration
	// RetryIn is the longest wait of the limits that rejected: the time
	// until every one of them has room again; 0 when Allowed.
	RetryIn time.Duration
	// Rejected is the index of the limit whose wait is RetryIn, -1 when
	// Allowed.
	Rejected int
	// N limits were decided; Limits[:N] are their states, in order.
	N      int
	Limits [MaxLimits]LimitState
}

// LimitState is one limit's state after a decision.
type LimitState struct {
	// The published limit: Limit units per Window.
	Limit  int
	Window time.Duration
	// Remaining is the units left after this request (0 when this limit
	// had no room).
	Remaining int
	// Reset is the time until the limit is whole again: the end of the
	// current window, or for a bucket the time until it is full (or
	// empty).
	Reset time.Duration
	// RetryIn is this limit's wait before the request would fit; 0 when it
	// had room.
	RetryIn time.Duration
}

// Binding is the index of the limit a client should heed: the one that
// rejected with the longest wait, else the one with the fewest units
// left (the longer reset on a tie). Headers that report one limit report
// this one.
func (d *Decision) Binding() int {
	if d.Rejected >= 0 {
		return d.Rejected
	}
	b := 0
	for i := 1; i < d.N; i++ {
		l, m := &d.Limits[i], &d.Limits[b]
		if l.Remaining < m.Remaining || (l.Remaining == m.Remaining && l.Reset > m.Reset) {
			b = i
		}
	}
	return b
}

// maxKeys and maxKeyBytes bound the keys a memory limiter tracks, in
// number and in bytes of key and state (each key is at most MaxIDBytes;
// a sliding-window-log key also holds 8 bytes per request in its window;
// see the package doc for the whole bound). Past either, keys whose limits
// are whole again are forgotten (they lose nothing); if most keys are
// still in use, all are forgotten (their limits start whole again). The
// attempt counter keeps two generations under the same two bounds.
const (
	maxKeys     = 1 << 16
	maxKeyBytes = 4 << 20
	// maxLogBytes bounds the sliding-window-log timestamps on top.
	maxLogBytes = 64 << 20
)

// NewMemoryLimiter returns the in-memory Limiter for spec's limits (the
// default backend; spec.Backend is not read). It is safe for concurrent
// use.
func NewMemoryLimiter(spec LimiterSpec) (Limiter, error) {
	if err := (&Quota{Limits: spec.Limits}).validateErr(); err != nil {
		return nil, fmt.Errorf("stubserver: memory limiter: %w", err)
	}
	m := &memLimiter{}
	for _, l := range spec.Limits {
		per := l.per()
		ml := &memLayer{
			alg:   l.algorithm(),
			shape: l.Mode == ModeShape,
			per:   per,
			n:     max(1, int(math.Floor(l.Limit))),
			rate:  l.Limit / per.Seconds(),
			burst: l.burst(),
			keys:  make(map[string]*memState),
		}
		ml.maxDelay = l.MaxDelay
		if ml.maxDelay == 0 {
			ml.maxDelay = per
		}
		m.layers = append(m.layers, ml)
	}
	return m, nil
}

// validateErr is validate's problems joined, nil when there are none.
func (q *Quota) validateErr() error {
	if errs := q.validate(); len(errs) > 0 {
		return fmt.Errorf("%w", errs[0])
	}
	return nil
}

type memLimiter struct {
	mu     sync.Mutex
	layers []*memLayer
}

// memLayer is one limit's state for every key.
type memLayer struct {
	alg      string
	shape    bool
	per      time.Duration
	n        int     // whole units per window (the published limit)
	rate     float64 // units per second
	burst    int
	maxDelay time.Duration

	keys     map[string]*memState
	bytes    int // bytes of the keys held
	logBytes int // bytes of sliding-window-log timestamps held
}

// memState is one key's state under one limit.
type memState struct {
	bucket *rate.Limiter // token-bucket
	// fixed-window and sliding-window: the index of the current window
	// and the counts of it and the one before.
	win       int64
	cur, prev int
	// sliding-window-log: arrival times (ns) in the window, oldest first,
	// one per unit.
	log []int64
	// leaky-bucket: the time the queue is empty again (ns, Unix).
	tat int64
}

func (m *memLimiter) Take(_ context.Context, c Charge, now time.Time) (Decision, error) {
	cost := max(1, c.Cost)
	d := Decision{Rejected: -1, N: len(m.layers)}
	var states [MaxLimits]*memState
	m.mu.Lock()
	defer m.mu.Unlock()
	// Check every layer, then charge all or none.
	for i, l := range m.layers {
		states[i] = l.state(c.Keys[i], now)
		ok, wait, delay := l.check(states[i], now, cost)
		d.Delay = max(d.Delay, delay)
		if !ok {
			d.Limits[i].RetryIn = wait
			if d.Rejected < 0 || wait > d.RetryIn {
				d.Rejected, d.RetryIn = i, wait
			}
		}
	}
	d.Allowed = d.Rejected < 0
	if !d.Allowed {
		d.Delay = 0
	}
	for i, l := range m.layers {
		if d.Allowed {
			l.charge(states[i], now, cost)
		}
		l.report(&d.Limits[i], states[i], now)
		if d.Limits[i].RetryIn > 0 {
			d.Limits[i].Remaining = 0
		}
	}
	return d, nil
}

// state returns key's state, creating it (and making room) if new.
func (l *memLayer) state(key string, now time.Time) *memState {
	st := l.keys[key]
	if st != nil {
		return st
	}
	if len(l.keys) >= maxKeys || l.bytes+len(key) > maxKeyBytes || l.logBytes > maxLogBytes {
		l.sweep(now)
	}
	st = &memState{}
	if l.alg == AlgTokenBucket {
		st.bucket = rate.NewLimiter(rate.Limit(l.rate), l.burst)
	}
	// A key may be a slice of a larger string (the request's path): hold
	// a copy of its own.
	l.keys[strings.Clone(key)] = st
	l.bytes += len(key)
	return st
}

// sweep forgets keys whose limit is whole again, or all of them when too
// few are.
func (l *memLayer) sweep(now time.Time) {
	w := now.UnixNano() / int64(l.per)
	for k, st := range l.keys {
		if l.whole(st, now, w) {
			delete(l.keys, k)
			l.bytes -= len(k)
			l.logBytes -= 8 * cap(st.log)
		}
	}
	if len(l.keys) >= maxKeys*3/4 || l.bytes >= maxKeyBytes*3/4 || l.logBytes >= maxLogBytes*3/4 {
		// Mostly live keys: start afresh rather than sweep again soon.
		clear(l.keys)
		l.bytes, l.logBytes = 0, 0
	}
}

func (l *memLayer) whole(st *memState, now time.Time, w int64) bool {
	switch l.alg {
	case AlgTokenBucket:
		return st.bucket.TokensAt(now) >= float64(l.burst)
	case AlgSlidingWindowLog:
		return len(st.log) == 0 || st.log[len(st.log)-1] <= now.UnixNano()-int64(l.per)
	case AlgLeakyBucket:
		return st.tat <= now.UnixNano()
	}
	return w-st.win >= 2
}

// perUnit is the time one unit takes to refill or drain.
func (l *memLayer) perUnit() float64 { return float64(time.Second) / l.rate }

// check reports whether st has room for cost units at now; if not, the
// wait until it has; for a shaper, the hold before the request leaves.
func (l *memLayer) check(st *memState, now time.Time, cost int) (ok bool, wait, delay time.Duration) {
	ns := now.UnixNano()
	switch l.alg {
	case AlgTokenBucket:
		tokens := st.bucket.TokensAt(now)
		if cost > l.burst {
			return false, l.per, 0
		}
		if tokens >= float64(cost) {
			return true, 0, 0
		}
		return false, ceilDur((float64(cost) - tokens) * l.perUnit()), 0
	case AlgFixedWindow:
		elapsed := l.roll(st, now)
		if st.cur+cost <= l.n {
			return true, 0, 0
		}
		return false, l.per - elapsed, 0
	case AlgSlidingWindow:
		return l.checkSliding(st, now, cost)
	case AlgSlidingWindowLog:
		l.trim(st, ns)
		if len(st.log)+cost <= l.n {
			return true, 0, 0
		}
		if cost > l.n {
			return false, l.per, 0
		}
		// The request fits once the oldest len+cost-n entries leave.
		leave := st.log[len(st.log)+cost-l.n-1]
		return false, time.Duration(leave + int64(l.per) - ns), 0
	case AlgLeakyBucket:
		// The queue holds (tat-now)/perUnit units and drains one per
		// perUnit; it takes at most burst.
		tat := max(st.tat, ns)
		next := float64(tat-ns) + float64(cost)*l.perUnit()
		capacity := float64(l.burst) * l.perUnit()
		if !l.shape {
			if next <= capacity+0.5 {
				return true, 0, 0
			}
			return false, ceilDur(next - capacity), 0
		}
		// A shaper lets burst units through at once, then spaces them.
		hold := ceilDur(next - capacity)
		if hold <= 0 {
			return true, 0, 0
		}
		if hold <= l.maxDelay {
			return true, 0, hold
		}
		return false, hold - l.maxDelay, 0
	}
	return false, 0, 0
}

// charge spends cost units of st at now; check allowed it.
func (l *memLayer) charge(st *memState, now time.Time, cost int) {
	ns := now.UnixNano()
	switch l.alg {
	case AlgTokenBucket:
		st.bucket.AllowN(now, cost)
	case AlgFixedWindow, AlgSlidingWindow:
		st.cur += cost
	case AlgSlidingWindowLog:
		before := cap(st.log)
		for range cost {
			st.log = append(st.log, ns)
		}
		l.logBytes += 8 * (cap(st.log) - before)
	case AlgLeakyBucket:
		st.tat = max(st.tat, ns) + int64(float64(cost)*l.perUnit())
	}
}

// report fills s with st's state at now.
func (l *memLayer) report(s *LimitState, st *memState, now time.Time) {
	ns := now.UnixNano()
	s.Limit, s.Window = l.n, l.per
	switch l.alg {
	case AlgTokenBucket:
		tokens := st.bucket.TokensAt(now)
		s.Remaining = max(0, int(tokens))
		s.Reset = ceilDur((float64(l.burst) - tokens) * l.perUnit())
	case AlgFixedWindow:
		elapsed := l.roll(st, now)
		s.Remaining = max(0, l.n-st.cur)
		s.Reset = l.per - elapsed
	case AlgSlidingWindow:
		elapsed := l.roll(st, now)
		est := float64(st.prev)*(1-float64(elapsed)/float64(l.per)) + float64(st.cur)
		s.Remaining = max(0, int(math.Floor(float64(l.n)-est)))
		s.Reset = l.per - elapsed
	case AlgSlidingWindowLog:
		l.trim(st, ns)
		s.Remaining = max(0, l.n-len(st.log))
		if len(st.log) > 0 {
			s.Reset = time.Duration(st.log[len(st.log)-1] + int64(l.per) - ns)
		}
	case AlgLeakyBucket:
		queued := float64(max(0, st.tat-ns)) / l.perUnit()
		s.Remaining = max(0, int(math.Floor(float64(l.burst)-queued+1e-9)))
		s.Reset = time.Duration(max(0, st.tat-ns))
	}
}

// trim drops the log entries that left the window ending at ns.
func (l *memLayer) trim(st *memState, ns int64) {
	cut := ns - int64(l.per)
	i := 0
	for i < len(st.log) && st.log[i] <= cut {
		i++
	}
	if i > 0 {
		n := copy(st.log, st.log[i:])
		st.log = st.log[:n]
	}
}

// roll moves st to the window holding now and returns the time elapsed in
// it.
func (l *memLayer) roll(st *memState, now time.Time) (elapsed time.Duration) {
	ns := now.UnixNano()
	w := ns / int64(l.per)
	switch {
	case w == st.win:
	case w == st.win+1:
		st.win, st.prev, st.cur = w, st.cur, 0
	case w > st.win:
		st.win, st.prev, st.cur = w, 0, 0
	}
	return time.Duration(ns - w*int64(l.per))
}

// checkSliding is the sliding window counter: the previous window's
// count, weighted by how much of it still overlaps the sliding window,
// plus the current window's.
func (l *memLayer) checkSliding(st *memState, now time.Time, cost int) (bool, time.Duration, time.Duration) {
	elapsed := l.roll(st, now)
	per := float64(l.per)
	frac := float64(elapsed) / per
	est := float64(st.prev)*(1-frac) + float64(st.cur)
	limit, c := float64(l.n), float64(cost)
	if est+c <= limit {
		return true, 0, 0
	}
	if cost > l.n {
		return false, l.per, 0
	}
	// When does est+cost fit again? Within this window only the previous
	// window's weight decays.
	var wait float64
	if float64(st.cur)+c <= limit && st.prev > 0 {
		// prev*(1-f') + cur + cost <= limit, f' = frac + wait/per
		need := 1 - (limit-float64(st.cur)-c)/float64(st.prev)
		wait = (need - frac) * per
	} else {
		// Next window: cur becomes prev; cur*(1-f) + cost <= limit.
		wait = (1 - frac) * per
		if st.cur > 0 {
			wait += math.Max(0, 1-(limit-c)/float64(st.cur)) * per
		}
	}
	return false, time.Duration(math.Ceil(math.Max(wait, 1))), 0
}

// ceilDur rounds ns up to a whole Duration (0 for ns <= 0).
func ceilDur(ns float64) time.Duration {
	if ns <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(ns))
}
