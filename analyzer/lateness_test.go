package analyzer

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// The start-lateness histograms moved to internal/loghist; these tests
// hold them to the buckets the verdicts were tuned with (the former
// hand-made ones, kept here as references).

// oldLateP90 is waves' former p90: two buckets per power of two of µs,
// the bucket's upper edge, 0 under 1 µs.
func oldLateP90(vals []int64) int64 {
	var hist [64]int64
	for _, ns := range vals {
		us := uint64(max(ns, 0) / 1000)
		b := 0
		if us > 0 {
			l := bits.Len64(us)
			half := 1
			if l >= 2 {
				half = int(us>>(l-2)) & 1
			}
			b = min(1+2*(l-1)+half, 63)
		}
		hist[b]++
	}
	n := int64(len(vals))
	want := (9*n + 9) / 10
	var acc int64
	for b, c := range hist {
		acc += c
		if acc >= want {
			if b == 0 {
				return 0
			}
			l, half := (b-1)/2, (b-1)%2
			return int64(float64(int64(1000)<<l) * (1.5 + 0.5*float64(half)))
		}
	}
	return 0
}

// oldLatencyQuantile is fidelity's former quantile: eight buckets per
// power of two of µs, the bucket's upper edge.
func oldLatencyQuantile(vals []int64, q float64) int64 {
	var counts [8 * 48]int64
	for _, ns := range vals {
		us := max(ns/1000, 0)
		b := 0
		if us >= 1 {
			e := bits.Len64(uint64(us)) - 1
			frac := int((us - 1<<e) * 8 >> e)
			b = min(1+e*8+frac, 8*48-1)
		}
		counts[b]++
	}
	rank := int64(math.Ceil(q * float64(len(vals))))
	var seen int64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			if i == 0 {
				return 1000
			}
			e, frac := (i-1)/8, (i-1)%8
			return int64((1<<e)+((int64(frac)+1)<<e)/8) * 1000
		}
	}
	return -1
}

// TestLatencyQuantileAsBefore: fidelity's lateness quantile is the former
// one from 8 µs up (below, within a few µs of it: far under any bound).
func TestLatencyQuantileAsBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for trial := range 300 {
		var h latencyHist
		var vals []int64
		scale := int64(1) << uint(13+trial%24) // 8 µs to ~69 s
		for range 1 + trial%80 {
			v := 8000 + r.Int64N(scale)
			vals = append(vals, v)
			h.add(v)
		}
		for _, q := range []float64{0.5, 0.99, 1} {
			if got, want := h.quantile(q), oldLatencyQuantile(vals, q); got != want {
				t.Fatalf("quantile(%v) of %v = %d; want %d", q, vals, got, want)
			}
		}
	}
	var h latencyHist
	if h.count() != 0 || h.quantile(0.99) != 0 {
		t.Errorf("empty: count %d, p99 %d; want 0, 0", h.count(), h.quantile(0.99))
	}
}
