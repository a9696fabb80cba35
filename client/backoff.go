package client

import (
	"math/rand/v2"
	"time"
)

// Ceiling returns the full-jitter envelope of retry n (1 for the first
// retry): min(cap, base·2^(n-1)), computed without overflow. Retries below 1
// count as 1.
func Ceiling(base, cap time.Duration, retry int) time.Duration {
	if retry < 1 {
		retry = 1
	}
	shift := retry - 1
	if base <= 0 {
		return 0
	}
	if shift >= 62 || base > cap>>shift {
		return cap
	}
	return base << shift
}

// Delay draws the wait before retry n (1 for the first retry) from r, under
// mode j; see the Jitter constants for each distribution. prev is the
// previous wait of the same call, used only by JitterDecorrelated (0 on the
// first retry). Delay is a pure function of its inputs and r's state.
func (j Jitter) Delay(r *rand.Rand, base, cap time.Duration, retry int, prev time.Duration) time.Duration {
	if cap < base {
		cap = base
	}
	switch j {
	case JitterEqual:
		c := Ceiling(base, cap, retry)
		half := c / 2
		return half + uniform(r, c-half)
	case JitterDecorrelated:
		if prev < base {
			prev = base
		}
		hi := cap
		if prev <= cap/3 {
			hi = prev * 3
		}
		if hi < base {
			hi = base
		}
		return base + uniform(r, hi-base)
	}
	return uniform(r, Ceiling(base, cap, retry))
}

// uniform returns a uniform duration in [0, d].
func uniform(r *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if d == 1<<63-1 {
		return time.Duration(r.Int64N(int64(d)))
	}
	return time.Duration(r.Int64N(int64(d) + 1))
}
