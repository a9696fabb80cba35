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

// A Limiter enforces one Quota for many keys. Take is the single call made
// per request in a quota phase: it decides and reports, atomically, so a
// remote backend (a Redis script) can implement it with one round trip and
// several stub instances share one quota.
type Limiter interface {
	// Take spends one unit of key's quota at now if there is room and
	// reports the state after the decision. now is the caller's clock; a
	// remote backend may use its own. An error (backend unreachable) makes
	// the server answer 503 without spending anything.
	Take(ctx context.Context, key string, now time.Time) (Decision, error)
}

// Decision is a Limiter's answer for one request.
type Decision struct {
	Allowed bool
	// Limit is the published quota: Limit units per Window.
	Limit  int
	Window time.Duration
	// Remaining is the units left after this request (0 when denied).
	Remaining int
	// Reset is the time until the quota is whole again: the end of the
	// current window, or for a token bucket the time until it is full.
	Reset time.Duration
	// RetryIn is the time until a request would be allowed again; 0 when
	// Allowed.
	RetryIn time.Duration
}

// maxKeys and maxKeyBytes bound the keys a memory limiter tracks, in
// number and in bytes of key (each key is at most MaxIDBytes; see the
// package doc for the whole bound). Past either, keys whose quota is whole
// again are forgotten (they lose nothing); if most keys are still in use,
// all are forgotten (their quotas start full again). The attempt counter
// keeps two generations under the same two bounds.
const (
	maxKeys     = 1 << 16
	maxKeyBytes = 4 << 20
)

// NewMemoryLimiter returns the in-memory Limiter for q (the default
// backend). It is safe for concurrent use.
func NewMemoryLimiter(q Quota) (Limiter, error) {
	if err := (Config{Quota: &q}).Validate(); err != nil {
		return nil, fmt.Errorf("stubserver: memory limiter: %w", err)
	}
	per := quotaPer(&q)
	m := &memLimiter{q: q, per: per, keys: make(map[string]*memState)}
	switch q.Algorithm {
	case "", AlgTokenBucket:
		m.alg = algBucket
		m.burst = q.Burst
		if m.burst == 0 {
			m.burst = max(1, int(q.Limit))
		}
		m.limit = rate.Limit(q.Limit / per.Seconds())
	case AlgFixedWindow:
		m.alg = algFixed
	case AlgSlidingWindow:
		m.alg = algSliding
	}
	m.n = int(math.Floor(q.Limit))
	return m, nil
}

const (
	algBucket = iota
	algFixed
	algSliding
)

type memLimiter struct {
	q     Quota
	alg   int
	per   time.Duration
	n     int        // whole units per window (published limit)
	limit rate.Limit // token bucket rate, tokens per second
	burst int

	mu    sync.Mutex
	keys  map[string]*memState
	bytes int // bytes of the keys held
}

// memState is one key's quota state.
type memState struct {
	bucket *rate.Limiter
	// windows: the index of the current window and the counts of it and
	// the one before.
	win       int64
	cur, prev int
}

func (m *memLimiter) Take(_ context.Context, key string, now time.Time) (Decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.keys[key]
	if st == nil {
		if len(m.keys) >= maxKeys || m.bytes+len(key) > maxKeyBytes {
			m.sweep(now)
		}
		st = &memState{}
		if m.alg == algBucket {
			st.bucket = rate.NewLimiter(m.limit, m.burst)
		}
		// A key may be a slice of a larger string (the request's path):
		// hold a copy of its own.
		m.keys[strings.Clone(key)] = st
		m.bytes += len(key)
	}
	switch m.alg {
	case algBucket:
		return m.takeBucket(st, now), nil
	case algFixed:
		return m.takeFixed(st, now), nil
	default:
		return m.takeSliding(st, now), nil
	}
}

// sweep forgets keys whose quota is whole again, or all of them when none
// is; m.mu is held.
func (m *memLimiter) sweep(now time.Time) {
	w := now.UnixNano() / int64(m.per)
	for k, st := range m.keys {
		switch {
		case st.bucket != nil && st.bucket.TokensAt(now) >= float64(m.burst),
			st.bucket == nil && w-st.win >= 2:
			delete(m.keys, k)
			m.bytes -= len(k)
		}
	}
	if len(m.keys) >= maxKeys*3/4 || m.bytes >= maxKeyBytes*3/4 {
		// Mostly live keys: start afresh rather than sweep again soon.
		clear(m.keys)
		m.bytes = 0
	}
}

func (m *memLimiter) takeBucket(st *memState, now time.Time) Decision {
	d := Decision{Limit: m.n, Window: m.per}
	if d.Limit < 1 {
		d.Limit = 1
	}
	d.Allowed = st.bucket.AllowN(now, 1)
	tokens := st.bucket.TokensAt(now)
	if tokens > 0 {
		d.Remaining = int(tokens)
	}
	perToken := float64(time.Second) / float64(m.limit)
	d.Reset = time.Duration(math.Ceil((float64(m.burst) - tokens) * perToken))
	if !d.Allowed {
		d.RetryIn = time.Duration(math.Ceil((1 - tokens) * perToken))
	}
	return d
}

// roll moves st to the window holding now.
func (m *memLimiter) roll(st *memState, now time.Time) (elapsed time.Duration) {
	ns := now.UnixNano()
	w := ns / int64(m.per)
	switch {
	case w == st.win:
	case w == st.win+1:
		st.win, st.prev, st.cur = w, st.cur, 0
	case w > st.win:
		st.win, st.prev, st.cur = w, 0, 0
	}
	return time.Duration(ns - w*int64(m.per))
}

func (m *memLimiter) takeFixed(st *memState, now time.Time) Decision {
	elapsed := m.roll(st, now)
	d := Decision{Limit: m.n, Window: m.per, Reset: m.per - elapsed}
	if st.cur < m.n {
		st.cur++
		d.Allowed = true
		d.Remaining = m.n - st.cur
	} else {
		d.RetryIn = d.Reset
	}
	return d
}

// takeSliding is the sliding window counter: the previous window's count,
// weighted by how much of it still overlaps the sliding window, plus the
// current window's.
func (m *memLimiter) takeSliding(st *memState, now time.Time) Decision {
	elapsed := m.roll(st, now)
	per := float64(m.per)
	frac := float64(elapsed) / per
	est := float64(st.prev)*(1-frac) + float64(st.cur)
	limit := float64(m.n)
	d := Decision{Limit: m.n, Window: m.per, Reset: m.per - elapsed}
	if est+1 <= limit {
		st.cur++
		d.Allowed = true
		d.Remaining = max(0, int(math.Floor(limit-est-1)))
		return d
	}
	// Denied: when does est+1 fit again? Within this window only the
	// previous window's weight decays.
	var wait float64
	if float64(st.cur)+1 <= limit && st.prev > 0 {
		// prev*(1-f') + cur + 1 <= limit, f' = frac + wait/per
		need := 1 - (limit-float64(st.cur)-1)/float64(st.prev)
		wait = (need - frac) * per
	} else {
		// Next window: cur becomes prev; cur*(1-f) + 1 <= limit.
		wait = (1 - frac) * per
		if st.cur > 0 {
			wait += math.Max(0, 1-(limit-1)/float64(st.cur)) * per
		}
	}
	d.RetryIn = time.Duration(math.Ceil(math.Max(wait, 1)))
	return d
}
