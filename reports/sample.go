package reports

import (
	"math"
	"math/rand/v2"
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

// logHist is a histogram of non-negative durations in buckets whose bounds
// grow by 1% from 1 µs, so quantiles and CDFs are within 1% of exact in
// bounded memory. Durations below 1 µs share bucket 0; above ~2.4 h the last.
type logHist struct {
	counts []uint64 // allocated on first add
	n      uint64
	max    int64
}

const (
	histMin     = 1e3 // ns, upper bound of bucket 0
	histGrowth  = 1.01
	histBuckets = 2300 // 1 µs·1.01^2300 ≈ 2.4 h
)

var logGrowth = math.Log(histGrowth)

func (h *logHist) add(d int64) {
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	if d < 0 {
		d = 0
	}
	h.counts[histBucket(d)]++
	h.n++
	if d > h.max {
		h.max = d
	}
}

func histBucket(d int64) int {
	if float64(d) <= histMin {
		return 0
	}
	i := int(math.Ceil(math.Log(float64(d)/histMin) / logGrowth))
	if i >= histBuckets {
		i = histBuckets - 1
	}
	return i
}

// histUpper is the upper bound (ns) of bucket i.
func histUpper(i int) float64 { return histMin * math.Pow(histGrowth, float64(i)) }

// quantile returns the q-quantile (0..1) in ns: the upper bound of the
// bucket holding it, but never more than the largest value added. It is 0
// for an empty histogram.
func (h *logHist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			return math.Min(histUpper(i), float64(h.max))
		}
	}
	return float64(h.max)
}

// cdf returns the points (ns, cumulative fraction) of the histogram's
// non-empty buckets, in order.
func (h *logHist) cdf() (xs, ys []float64) {
	var cum uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		cum += c
		xs = append(xs, math.Min(histUpper(i), float64(h.max)))
		ys = append(ys, float64(cum)/float64(h.n))
	}
	return xs, ys
}
