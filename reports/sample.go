package reports

import (
	"math/rand/v2"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
)

// reservoir keeps a uniform sample of at most cap items from a stream
// (Vitter's algorithm R) with a fixed seed, so the same stream always gives
// the same sample.
type reservoir[T any] struct {
	cap   int
	seen  int64
	items []T
	rng   *rand.Rand
}

func newReservoir[T any](capacity int, seed uint64) *reservoir[T] {
	return &reservoir[T]{cap: capacity, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

func (r *reservoir[T]) add(v T) {
	r.seen++
	if len(r.items) < r.cap {
		r.items = append(r.items, v)
		return
	}
	if j := r.rng.Int64N(r.seen); j < int64(r.cap) {
		r.items[j] = v
	}
}

// logHist is the report's histogram of non-negative durations (ns):
// internal/loghist with 128 buckets per power of two of microseconds, so
// quantiles and CDFs are within 1% of exact (within 1 µs below 128 µs).
// n and max mirror the histogram's for the collector and the plots.
type logHist struct {
	h   *loghist.Hist // made at the first add
	n   uint64
	max int64
}

// histLayout is the report's histogram layout.
var histLayout = loghist.Layout{Unit: int64(time.Microsecond), Bits: 7}

func (h *logHist) add(d int64) {
	if h.h == nil {
		h.h = loghist.New(histLayout)
	}
	h.h.Add(d)
	h.n, h.max = h.h.N(), h.h.Max()
}

// quantile returns the q-quantile (0..1) in ns: the upper edge of the
// bucket holding it, but never more than the largest value added. It is 0
// for an empty histogram.
func (h *logHist) quantile(q float64) float64 {
	if h.h == nil {
		return 0
	}
	return float64(h.h.Quantile(q))
}

// cdf returns the points (ns, cumulative fraction) of the histogram's
// non-empty buckets, in order.
func (h *logHist) cdf() (xs, ys []float64) {
	if h.h == nil {
		return nil, nil
	}
	x, ys := h.h.CDF()
	xs = make([]float64, len(x))
	for i, v := range x {
		xs[i] = float64(v)
	}
	return xs, ys
}
