package scenarios

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// histogram is a lock-free log-linear histogram of non-negative
// nanosecond values, 16 sub-buckets per power of two of microseconds.
type histogram struct {
	counts [64 * 16]atomic.Int64
	max    atomic.Int64
}

func (h *histogram) add(ns int64) {
	ns = max(ns, 0)
	for {
		m := h.max.Load()
		if ns <= m || h.max.CompareAndSwap(m, ns) {
			break
		}
	}
	h.counts[bucketOf(uint64(ns/1000))].Add(1)
}

func bucketOf(us uint64) int {
	if us < 16 {
		return int(us)
	}
	e := bits.Len64(us) - 5
	return (e+1)*16 + int((us>>e)&15)
}

// bucketLow is the smallest value (µs) of bucket i.
func bucketLow(i int) uint64 {
	if i < 16 {
		return uint64(i)
	}
	e := i/16 - 1
	return uint64(16+i%16) << e
}

func (h *histogram) quantile(q float64) time.Duration {
	var total int64
	for i := range h.counts {
		total += h.counts[i].Load()
	}
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	var cum int64
	for i := range h.counts {
		cum += h.counts[i].Load()
		if cum >= rank {
			return time.Duration(bucketLow(i)) * time.Microsecond
		}
	}
	return time.Duration(h.max.Load())
}

func (h *histogram) summary() Lateness {
	return Lateness{P50: h.quantile(0.5), P99: h.quantile(0.99), Max: time.Duration(h.max.Load())}
}
