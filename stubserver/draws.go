package stubserver

import (
	"math/bits"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// The draws' purposes (see draw).
const (
	drawMix uint64 = iota + 1
	drawSpread
)

// draw is a uniform 64-bit value for one purpose of one attempt: a hash of
// the seed, the attempt's key and number, and the purpose (FNV-1a, then
// SplitMix64's finalizer). A draw does not depend on the order in which
// requests arrive, only on which request it is, so a seeded run replays
// even when many requests share an instant (a virtual run's lockstep
// clients), and two stubs with one seed draw alike for one attempt.
func (s *Server) draw(a *timeline.Attempt, purpose uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(a.Key); i++ {
		h ^= uint64(a.Key[i])
		h *= 1099511628211
	}
	x := h ^ s.seed*0x9e3779b97f4a7c15 ^ uint64(a.Attempt)<<32 ^ purpose<<56
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// below is a draw reduced to [0, n), n > 0.
func below(x uint64, n int64) int64 {
	hi, _ := bits.Mul64(x, uint64(n))
	return int64(hi)
}

// pick draws an index from cumulative weights, for a.
func (s *Server) pick(cum []float64, a *timeline.Attempt) int {
	x := float64(s.draw(a, drawMix)>>11) / (1 << 53) * cum[len(cum)-1]
	for i, c := range cum {
		if x < c {
			return i
		}
	}
	return len(cum) - 1
}

// spread draws the phase's Retry-After spread, uniform in [0, Spread), for
// the forms that are not whole seconds.
func (s *Server) spread(ph *phase, a *timeline.Attempt) time.Duration {
	if ph.RetryAfter.Spread <= 0 {
		return 0
	}
	return time.Duration(below(s.draw(a, drawSpread), int64(ph.RetryAfter.Spread)))
}

// spreadSeconds draws the spread of a whole-second form (delta, date):
// uniform in whole seconds over [0, ceil(Spread/1s)], both ends included, so
// a spread of 1s sends two distinct values.
func (s *Server) spreadSeconds(ph *phase, a *timeline.Attempt) int64 {
	n := ceilSeconds(ph.RetryAfter.Spread)
	if n == 0 {
		return 0
	}
	return below(s.draw(a, drawSpread), n+1)
}
