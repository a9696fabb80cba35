package loghist

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

var layouts = []Layout{
	{Unit: 1000, Bits: 1},
	{Unit: 1000, Bits: 3},
	{Unit: 1000, Bits: 4},
	{Unit: 1000, Bits: 7},
	{Unit: 1, Bits: 5},
	{Bits: 0},
}

// TestBucketEdges: every value lies in [Lower, Upper) of its bucket, a
// bucket is at most one Unit or 1/2^Bits of its Lower wide, and the
// buckets are in order and cover 0..MaxInt64.
func TestBucketEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, l := range layouts {
		vals := []int64{0, 1, l.unit() - 1, l.unit(), 2*l.unit() - 1, 1 << 20, math.MaxInt64 - 1, math.MaxInt64}
		for range 10000 {
			vals = append(vals, r.Int64N(1<<uint(r.IntN(63))+1))
		}
		for _, v := range vals {
			i := l.Bucket(v)
			lo, hi := l.Lower(i), l.Upper(i)
			if v < lo || (v >= hi && hi != math.MaxInt64) {
				t.Fatalf("%+v: %d in bucket %d = [%d, %d)", l, v, i, lo, hi)
			}
			if w := hi - lo; hi != math.MaxInt64 && w > l.unit() && float64(w) > float64(lo)/float64(int64(1)<<l.Bits)*1.000001 {
				t.Fatalf("%+v: bucket %d = [%d, %d) is wider than 1/%d of %d", l, i, lo, hi, 1<<l.Bits, lo)
			}
		}
		if n := l.Len(); l.Bucket(math.MaxInt64) != n-1 || l.Lower(0) != 0 {
			t.Errorf("%+v: Len %d, last bucket %d, Lower(0) %d", l, n, l.Bucket(math.MaxInt64), l.Lower(0))
		}
		for i := 1; i < l.Len(); i++ {
			if l.Lower(i) <= l.Lower(i-1) || l.Upper(i-1) != l.Lower(i) {
				t.Fatalf("%+v: buckets %d and %d: [%d, %d) then [%d, ...)", l, i-1, i, l.Lower(i-1), l.Upper(i-1), l.Lower(i))
			}
		}
	}
	if got := (Layout{Unit: 1000, Bits: 4}).Bucket(-5); got != 0 {
		t.Errorf("Bucket(-5) = %d; want 0", got)
	}
}

// TestQuantile holds Quantile to the exact quantile of a sample: never
// below it, at most 1/2^Bits (or one Unit) above it, never above the max.
func TestQuantile(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, l := range layouts {
		for _, dist := range []string{"uniform", "exponential", "constant"} {
			h := New(l)
			var vals []int64
			for range 5000 {
				var v int64
				switch dist {
				case "uniform":
					v = r.Int64N(10_000_000_000)
				case "exponential":
					v = int64(r.ExpFloat64() * 50e6)
				case "constant":
					v = 300_000_000
				}
				vals = append(vals, v)
				h.Add(v)
			}
			slices.Sort(vals)
			for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1} {
				exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
				got := h.Quantile(q)
				slack := max(float64(l.unit()), float64(exact)/float64(int64(1)<<l.Bits))
				if got < exact || float64(got-exact) > slack || got > vals[len(vals)-1] {
					t.Errorf("%+v %s: Quantile(%v) = %d; exact %d, want within %.0f above", l, dist, q, got, exact, slack)
				}
				if b := h.QuantileBucket(q); b != l.Bucket(exact) {
					t.Errorf("%+v %s: QuantileBucket(%v) = %d; want %d, the bucket of %d", l, dist, q, b, l.Bucket(exact), exact)
				}
			}
			if h.N() != uint64(len(vals)) || h.Max() != vals[len(vals)-1] {
				t.Errorf("%+v %s: N %d, Max %d; want %d, %d", l, dist, h.N(), h.Max(), len(vals), vals[len(vals)-1])
			}
		}
	}
}

// TestQuantileSmall: with few values the ranks are exact.
func TestQuantileSmall(t *testing.T) {
	h := New(Layout{Unit: 1000, Bits: 4})
	if h.Quantile(0.5) != 0 || h.QuantileBucket(0.5) != -1 || h.RankBucket(1) != -1 {
		t.Errorf("empty: Quantile %d, QuantileBucket %d; want 0, -1", h.Quantile(0.5), h.QuantileBucket(0.5))
	}
	for _, us := range []int64{3, 1000, 7} {
		h.Add(us * 1000)
	}
	h.Add(-4) // counts as 0: its quantile reads as bucket 0's upper edge, 1 µs
	for _, tt := range []struct {
		q    float64
		want int64
	}{{0, 1000}, {0.25, 1000}, {0.26, 4000}, {0.5, 4000}, {0.75, 8000}, {0.99, 1000_000}, {1, 1000_000}} {
		if got := h.Quantile(tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %d; want %d", tt.q, got, tt.want)
		}
	}
	if got := h.Layout().Lower(h.RankBucket(4)); got != 992_000 {
		t.Errorf("Lower of the 4th value's bucket = %d; want 992000 (1000 µs within 1/16)", got)
	}
}

// TestCDF: one point per non-empty bucket, rising to (Max, 1).
func TestCDF(t *testing.T) {
	h := New(Layout{Unit: 1000, Bits: 7})
	if xs, fs := h.CDF(); xs != nil || fs != nil {
		t.Errorf("empty CDF = %v, %v; want none", xs, fs)
	}
	for i := int64(1); i <= 1000; i++ {
		h.Add(i * 1_000_000)
	}
	xs, fs := h.CDF()
	if len(xs) != len(fs) || len(xs) == 0 {
		t.Fatalf("CDF has %d xs and %d fractions", len(xs), len(fs))
	}
	if xs[len(xs)-1] != 1_000_000_000 || fs[len(fs)-1] != 1 {
		t.Errorf("CDF ends at (%d, %v); want (1e9, 1)", xs[len(xs)-1], fs[len(fs)-1])
	}
	for i := 1; i < len(xs); i++ {
		if xs[i] <= xs[i-1] || fs[i] <= fs[i-1] {
			t.Fatalf("CDF not increasing at %d: (%d, %v) after (%d, %v)", i, xs[i], fs[i], xs[i-1], fs[i-1])
		}
	}
	// Half the values are at most 500 ms: the curve says so within 1/128.
	for i, x := range xs {
		if x >= 500_000_000 {
			if fs[i] < 0.5 || fs[i] > 0.5*(1+1.0/128)+0.001 {
				t.Errorf("CDF at %d = %v; want 0.5 within 1/128", x, fs[i])
			}
			break
		}
	}
}

// TestAtomic: adds from many goroutines at once all count, and the
// snapshot reads as a Hist fed the same values.
func TestAtomic(t *testing.T) {
	l := Layout{Unit: 1000, Bits: 4}
	a := NewAtomic(l)
	want := New(l)
	const workers, each = 8, 1000
	for w := range workers {
		for i := range each {
			want.Add(int64(w*each+i) * 37_000)
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				a.Add(int64(w*each+i) * 37_000)
			}
		})
	}
	wg.Wait()
	got := a.Snapshot()
	if got.N() != want.N() || got.Max() != want.Max() {
		t.Fatalf("snapshot N %d, Max %d; want %d, %d", got.N(), got.Max(), want.N(), want.Max())
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		if g, w := got.Quantile(q), want.Quantile(q); g != w {
			t.Errorf("Quantile(%v) = %d; want %d", q, g, w)
		}
	}
	if s := NewAtomic(l).Snapshot(); s.N() != 0 || s.Quantile(0.99) != 0 || s.Max() != 0 {
		t.Errorf("empty snapshot: N %d, p99 %d, Max %d", s.N(), s.Quantile(0.99), s.Max())
	}
}

// TestBelow: Below counts the buckets wholly under v, so it never counts
// a value at or above v and misses at most v's own bucket.
func TestBelow(t *testing.T) {
	l := Layout{Unit: 1000, Bits: 3}
	h := New(l)
	for _, v := range []int64{0, 500, 1000, 1999, 5000, 50_000, 49_000} {
		h.Add(v)
	}
	for _, tc := range []struct {
		v        int64
		min, max uint64
	}{{0, 0, 0}, {1000, 2, 2}, {2000, 3, 4}, {6000, 5, 5}, {50_000, 5, 6}, {1 << 40, 7, 7}} {
		if got := h.Below(tc.v); got < tc.min || got > tc.max {
			t.Errorf("Below(%d) = %d; want %d..%d", tc.v, got, tc.min, tc.max)
		}
	}
	if New(l).Below(10) != 0 {
		t.Error("empty histogram: Below != 0")
	}
}
