package client

import (
	"context"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// state returns the key's state, making it when create is set (else nil if
// there is none).
func (t *Transport) state(key string, create bool) *keyState {
	t.mu.RLock()
	ks := t.keys[key]
	t.mu.RUnlock()
	if ks != nil || !create {
		return ks
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ks = t.keys[key]; ks == nil {
		ks = &keyState{}
		if t.cfg.Rate > 0 {
			ks.bucket = rate.NewLimiter(rate.Limit(t.cfg.Rate), t.cfg.Burst)
		}
		t.keys[key] = ks
	}
	return ks
}

// Limiter paces attempts per quota key in place of the Transport's own
// in-process token buckets; give one in Config.Limiter when a fleet of
// processes shares one quota, so the aggregate rate stays bounded (for
// example a token bucket in Redis, updated atomically by a script).
type Limiter interface {
	// Reserve takes a permit for key at now, and returns how long to wait
	// before using it and a function that gives the permit back (called,
	// at most once, when the wait is not started or is cut short). An error
	// ends the call with a *RetryError whose Reason is that error.
	Reserve(ctx context.Context, key string, now time.Time) (wait time.Duration, cancel func(), err error)
}

// paces reports whether anything paces attempts: a Limiter, a Rate, or a
// key's slow-down.
func (t *Transport) paces() bool {
	return t.cfg.Limiter != nil || t.cfg.Rate > 0 || t.slowing.Load()
}

// pace waits until the key's bucket (or the Limiter) and slow-down allow an
// attempt. A wait that would reach budgetEnd is not started: pace returns it
// with ErrBudgetExhausted, its reservations given back. A wait ended by ctx
// returns ctx's error. serverPaced skips the slow-down: the attempt follows
// a Retry-After, which wins over rate-limit headers.
func (t *Transport) pace(ctx context.Context, req *http.Request, key string, attempt int, budgetEnd time.Time, serverPaced bool) (time.Duration, error) {
	if !t.paces() {
		return 0, nil
	}
	lim := t.cfg.Limiter
	now := time.Now()
	var (
		wait     time.Duration
		src      = SourceBucket
		giveBack func()
	)
	if lim != nil {
		w, cancel, err := lim.Reserve(ctx, key, now)
		if err != nil {
			return 0, err
		}
		wait, giveBack = w, cancel
	}
	ks := t.state(key, lim == nil && t.cfg.Rate > 0)
	if ks != nil && ks.bucket != nil {
		res := ks.bucket.ReserveN(now, 1)
		wait = res.DelayFrom(now)
		giveBack = func() { res.CancelAt(time.Now()) }
	}
	if ks != nil && !serverPaced {
		// Retry-After, when it set the last wait, wins over the headers' reset.
		if sd := ks.slowDelay(now); sd > wait {
			wait, src = sd, SourceSlowDown
		}
	}
	if wait <= 0 {
		return 0, ctx.Err()
	}
	if wait >= t.cfg.Budget || !now.Add(wait).Before(budgetEnd) {
		if giveBack != nil {
			giveBack()
		}
		return wait, ErrBudgetExhausted
	}
	t.obs.PacingWait(PacingEvent{Request: req, Key: key, Attempt: attempt, Wait: wait, Source: src})
	if err := sleep(ctx, wait); err != nil {
		if giveBack != nil {
			giveBack()
		}
		return 0, err
	}
	return 0, nil
}

// maxReset bounds a rate-limit reset taken into account; any wait that long
// is past every budget anyway.
const maxReset = 365 * 24 * time.Hour

// slowDelay takes the next slow-down slot, returning how long until it.
func (ks *keyState) slowDelay(now time.Time) time.Duration {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if !now.Before(ks.slowUntil) {
		return 0
	}
	slot := ks.slowNext
	if slot.Before(now) {
		slot = now
	}
	if !slot.Before(ks.slowUntil) {
		// Past the reset a fresh quota starts: release at the reset.
		return ks.slowUntil.Sub(now)
	}
	ks.slowNext = slot.Add(ks.slowEvery)
	return slot.Sub(now)
}

// observeHeaders reads the rate-limit headers of a response without a usable
// Retry-After (which wins over them): below SlowDownBelow
// of the limit (or at 0 remaining), the key's remaining quota is spread evenly
// until the reset; at or above it, the slow-down ends.
func (t *Transport) observeHeaders(resp *http.Response, key string, now time.Time) {
	h := resp.Header
	if len(h["Ratelimit"]) == 0 && len(h["X-Ratelimit-Remaining"]) == 0 && len(h["Ratelimit-Remaining"]) == 0 {
		return
	}
	rl, ok := ParseRateLimit(h, now)
	if !ok {
		return
	}
	low := rl.Remaining == 0 || (rl.Limit > 0 && float64(rl.Remaining) < SlowDownBelow*float64(rl.Limit))
	if !low || rl.Reset <= 0 {
		if ks := t.state(key, false); ks != nil {
			ks.mu.Lock()
			ks.slowUntil = time.Time{}
			ks.mu.Unlock()
		}
		return
	}
	t.slowing.Store(true)
	ks := t.state(key, true)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if rl.Reset > maxReset {
		rl.Reset = maxReset // keeps the arithmetic below from overflowing
	}
	until := now.Add(rl.Reset)
	every := rl.Reset / time.Duration(rl.Remaining+1)
	ks.slowUntil = until
	ks.slowEvery = every
	if next := now.Add(every); ks.slowNext.Before(next) {
		ks.slowNext = next
	}
}
