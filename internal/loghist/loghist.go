// Package loghist is retrylab's one histogram: a log-linear histogram of
// non-negative int64 values (durations in ns), bucketed as HDR histograms
// are. Values are counted in whole units (Layout.Unit); below 2^Bits units
// every unit has its bucket, above it every power of two is cut into 2^Bits
// buckets, so a bucket is never wider than 1/2^Bits of its smallest value
// and a quantile read from its bucket is within that of exact.
//
// Hist is for one goroutine; Atomic takes adds from many at once and is
// read through a Snapshot.
package loghist

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// Layout is how values are bucketed.
type Layout struct {
	// Unit is the width of the finest buckets, in the values' unit (1000
	// for µs buckets of ns values; 0 or 1: the value itself).
	Unit int64
	// Bits sets the precision: 2^Bits buckets per power of two of units
	// (0 to 16).
	Bits uint
}

func (l Layout) unit() int64 {
	if l.Unit <= 0 {
		return 1
	}
	return l.Unit
}

// Bucket is the index of v's bucket; negative values count as 0.
func (l Layout) Bucket(v int64) int {
	u := uint64(max(v, 0) / l.unit())
	sub := uint64(1) << l.Bits
	if u < sub {
		return int(u)
	}
	e := bits.Len64(u) - int(l.Bits) - 1 // u>>e is in [sub, 2·sub)
	return (e+1)<<l.Bits + int(u>>e-sub)
}

// Len is the number of buckets: the last holds math.MaxInt64.
func (l Layout) Len() int { return l.Bucket(math.MaxInt64) + 1 }

// Lower is the smallest value of bucket i.
func (l Layout) Lower(i int) int64 {
	u := l.lowerUnits(i)
	if u > uint64(math.MaxInt64/l.unit()) {
		return math.MaxInt64
	}
	return int64(u) * l.unit()
}

// Upper is the smallest value above bucket i: the next bucket's Lower
// (math.MaxInt64 for the last).
func (l Layout) Upper(i int) int64 { return l.Lower(i + 1) }

func (l Layout) lowerUnits(i int) uint64 {
	sub := 1 << l.Bits
	if i < sub {
		return uint64(i)
	}
	e := i>>l.Bits - 1
	return uint64(sub+i&(sub-1)) << e
}

// Hist counts values in a Layout's buckets. Its zero value is not ready:
// make one with New.
type Hist struct {
	layout Layout
	counts []uint64 // allocated at the first Add
	n      uint64
	max    int64
}

// New returns an empty histogram of layout l.
func New(l Layout) *Hist { return &Hist{layout: l} }

// Layout is h's layout.
func (h *Hist) Layout() Layout { return h.layout }

// Add counts v (a negative v as 0).
func (h *Hist) Add(v int64) {
	if h.counts == nil {
		h.counts = make([]uint64, h.layout.Len())
	}
	v = max(v, 0)
	h.counts[h.layout.Bucket(v)]++
	h.n++
	h.max = max(h.max, v)
}

// N is the number of values added.
func (h *Hist) N() uint64 { return h.n }

// Clone returns a copy of h that shares nothing with it.
func (h *Hist) Clone() *Hist {
	c := *h
	c.counts = append([]uint64(nil), h.counts...)
	return &c
}

// Max is the largest value added (0 for none).
func (h *Hist) Max() int64 { return h.max }

// RankBucket is the bucket holding the rank-th smallest value (from 1;
// clamped to 1..N), -1 for an empty histogram.
func (h *Hist) RankBucket(rank uint64) int {
	if h.n == 0 {
		return -1
	}
	rank = min(max(rank, 1), h.n)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			return i
		}
	}
	return len(h.counts) - 1 // not reached: the counts sum to n
}

// QuantileBucket is the bucket holding the q-quantile (0..1): that of
// rank ⌈q·N⌉. It is -1 for an empty histogram.
func (h *Hist) QuantileBucket(q float64) int {
	return h.RankBucket(uint64(math.Ceil(q * float64(h.n))))
}

// Quantile is the q-quantile (0..1): the upper edge of its bucket, but
// never more than the largest value added, so it is at most 1/2^Bits (or
// one Unit) above the exact quantile and never below it. It is 0 for an
// empty histogram.
func (h *Hist) Quantile(q float64) int64 {
	i := h.QuantileBucket(q)
	if i < 0 {
		return 0
	}
	return min(h.layout.Upper(i), h.max)
}

// CDF returns one point per non-empty bucket, in order: the bucket's upper
// edge (at most Max) and the fraction of values in it and below.
func (h *Hist) CDF() (xs []int64, fractions []float64) {
	var cum uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		cum += c
		xs = append(xs, min(h.layout.Upper(i), h.max))
		fractions = append(fractions, float64(cum)/float64(h.n))
	}
	return xs, fractions
}

// Atomic is a histogram that many goroutines may Add to at once, without
// locks; read it through Snapshot.
type Atomic struct {
	layout Layout
	counts []atomic.Uint64
	max    atomic.Int64
}

// NewAtomic returns an empty concurrent histogram of layout l.
func NewAtomic(l Layout) *Atomic {
	return &Atomic{layout: l, counts: make([]atomic.Uint64, l.Len())}
}

// Add counts v (a negative v as 0).
func (a *Atomic) Add(v int64) {
	v = max(v, 0)
	for {
		m := a.max.Load()
		if v <= m || a.max.CompareAndSwap(m, v) {
			break
		}
	}
	a.counts[a.layout.Bucket(v)].Add(1)
}

// Snapshot copies a's counts into a Hist. Adds racing with it may be
// partly counted: in Max but not yet in a bucket, or the reverse.
func (a *Atomic) Snapshot() *Hist {
	h := &Hist{layout: a.layout, counts: make([]uint64, len(a.counts))}
	for i := range a.counts {
		c := a.counts[i].Load()
		h.counts[i] = c
		h.n += c
	}
	h.max = a.max.Load()
	return h
}

// Below counts the values in the buckets that lie wholly under v (upper
// edge ≤ v): at most the values under v, and at least those under v's
// bucket's lower edge.
func (h *Hist) Below(v int64) uint64 {
	if h.n == 0 || v <= 0 {
		return 0
	}
	var n uint64
	for i, c := range h.counts {
		if h.layout.Upper(i) > v {
			break
		}
		n += c
	}
	return n
}
