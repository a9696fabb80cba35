package analyzer

import (
	"math"
	"time"
)

// What the stated policy bounds: the longest wait it allows before a
// retry, and the share of its waits under a window.

// policyBound is the longest delay the stated policy allows before retry k (1-based):
// min(cap, base·2^n) with n = k-1+first_exponent; the cap alone for
// decorrelated jitter.
func (a *Analyzer) policyBound(k int) int64 {
	p := a.policy
	if p.Jitter == "decorrelated" {
		return p.Cap
	}
	n := k - 1 + a.firstExp
	b := p.Base
	for i := 0; i < n && b < math.MaxInt64/2; i++ {
		b *= 2
	}
	if p.Cap > 0 && b > p.Cap {
		b = p.Cap
	}
	return b
}

// instantProb is the probability that the stated policy's delay before retry
// k is shorter than the window win (0 without a policy).
func (a *Analyzer) instantProb(k int, win int64) float64 {
	p := a.policy
	if p == nil || p.Base <= 0 {
		return 0
	}
	w := float64(win)
	b := float64(a.policyBound(k))
	clamp := func(x float64) float64 { return min(1, max(0, x)) }
	switch p.Jitter {
	case "none", "":
		if b < w {
			return 1
		}
		return 0
	case "equal":
		return clamp((w - b/2) / (b / 2))
	case "decorrelated":
		base := float64(p.Base)
		return clamp((w - base) / (2 * base))
	default: // full and anything unknown: uniform on [0, b]
		if b <= 0 {
			return 1
		}
		return clamp(w / b)
	}
}

// Tolerances returns the retry-after and jitter-bounds tolerances in force:
// how early before not_before a retry may arrive, and how far past the
// stated bound a client-paced delay may be, before Retry.Early or
// Retry.Beyond is set.
func (a *Analyzer) Tolerances() (retryAfter, bound time.Duration) {
	return time.Duration(a.raTol), time.Duration(a.jbTol)
}

// Bound returns the longest delay the stated policy allows before retry
// number k (1-based), as the jitter-bounds check has it: min(cap,
// base·2^n) with n = k−1+first_exponent, the cap alone for decorrelated
// jitter. ok is false when the check judges no delay (no stated bound, or
// a client expected to self-throttle).
func (a *Analyzer) Bound(k int) (b time.Duration, ok bool) {
	if !a.jbJudges() || k < 1 {
		return 0, false
	}
	return time.Duration(a.policyBound(k)), true
}

// jbJudges reports whether jitter-bounds judges client-paced delays.
func (a *Analyzer) jbJudges() bool { return a.jbBounded && !a.pacingOn }
