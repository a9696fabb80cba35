package client

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		base, cap time.Duration
		retry     int
		want      time.Duration
	}{
		{100 * ms, 30 * time.Second, 0, 100 * ms},
		{100 * ms, 30 * time.Second, 1, 100 * ms},
		{100 * ms, 30 * time.Second, 2, 200 * ms},
		{100 * ms, 30 * time.Second, 5, 1600 * ms},
		{100 * ms, 30 * time.Second, 9, 25600 * ms},
		{100 * ms, 30 * time.Second, 10, 30 * time.Second},
		{100 * ms, 30 * time.Second, 63, 30 * time.Second},
		{100 * ms, 30 * time.Second, 1 << 30, 30 * time.Second},
		{time.Duration(math.MaxInt64 / 2), time.Duration(math.MaxInt64), 3, time.Duration(math.MaxInt64)},
		{0, time.Second, 3, 0},
	}
	for _, tt := range tests {
		if got := Ceiling(tt.base, tt.cap, tt.retry); got != tt.want {
			t.Errorf("Ceiling(%v, %v, %d) = %v; want %v", tt.base, tt.cap, tt.retry, got, tt.want)
		}
	}
}

func TestDelayBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base, cap := 100*time.Millisecond, 5*time.Second
	for _, j := range []Jitter{JitterFull, JitterEqual, JitterDecorrelated} {
		prev := time.Duration(0)
		for i := 0; i < 20000; i++ {
			retry := 1 + i%12
			if retry == 1 {
				prev = 0
			}
			d := j.Delay(r, base, cap, retry, prev)
			lo, hi := time.Duration(0), Ceiling(base, cap, retry)
			switch j {
			case JitterEqual:
				lo = hi / 2
			case JitterDecorrelated:
				lo, hi = base, min(cap, 3*max(prev, base))
			}
			if d < lo || d > hi {
				t.Fatalf("%v.Delay(retry %d, prev %v) = %v; want in [%v, %v]", j, retry, prev, d, lo, hi)
			}
			prev = d
		}
	}
}

// TestFullJitterDistribution checks, with a fixed seed, that full jitter is
// uniform over [0, ceil]: its mean, its spread, and a chi-square test over
// ten equal bins.
func TestFullJitterDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	const n, bins = 100000, 10
	base, cap := 100*time.Millisecond, 30*time.Second
	for _, retry := range []int{1, 4, 12} {
		ceil := Ceiling(base, cap, retry)
		var counts [bins]int
		var sum float64
		for range n {
			d := JitterFull.Delay(r, base, cap, retry, 0)
			f := float64(d) / float64(ceil)
			sum += f
			b := int(f * bins)
			if b == bins {
				b--
			}
			counts[b]++
		}
		if mean := sum / n; math.Abs(mean-0.5) > 0.01 {
			t.Errorf("retry %d: mean of full jitter / ceil = %.4f; want 0.5±0.01", retry, mean)
		}
		var chi2 float64
		want := float64(n) / bins
		for _, c := range counts {
			chi2 += (float64(c) - want) * (float64(c) - want) / want
		}
		// 9 degrees of freedom: p = 0.001 at 27.88.
		if chi2 > 27.88 {
			t.Errorf("retry %d: chi-square over %d bins = %.1f; want < 27.88 (uniform), counts %v", retry, bins, chi2, counts)
		}
	}
}

func TestEqualJitterDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ceil := Ceiling(200*time.Millisecond, time.Minute, 3)
	var sum float64
	const n = 50000
	for range n {
		sum += float64(JitterEqual.Delay(r, 200*time.Millisecond, time.Minute, 3, 0)) / float64(ceil)
	}
	if mean := sum / n; math.Abs(mean-0.75) > 0.01 {
		t.Errorf("mean of equal jitter / ceil = %.4f; want 0.75±0.01", mean)
	}
}

func TestDelayReplays(t *testing.T) {
	draw := func() []time.Duration {
		r := rand.New(rand.NewPCG(9, 9))
		var out []time.Duration
		for i := 1; i <= 50; i++ {
			out = append(out, JitterFull.Delay(r, time.Millisecond, time.Second, i%8+1, 0))
		}
		return out
	}
	a, b := draw(), draw()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("draw %d = %v then %v; want the same with the same seed", i, a[i], b[i])
		}
	}
}

func TestParseJitter(t *testing.T) {
	tests := []struct {
		in   string
		want Jitter
		err  bool
	}{
		{"", JitterFull, false}, {"full", JitterFull, false}, {"Equal", JitterEqual, false},
		{"decorrelated", JitterDecorrelated, false}, {"none", JitterFull, true}, {"fixed", JitterFull, true},
	}
	for _, tt := range tests {
		got, err := ParseJitter(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ParseJitter(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
		if err == nil && got.String() != map[Jitter]string{JitterFull: "full", JitterEqual: "equal", JitterDecorrelated: "decorrelated"}[got] {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	if s := Jitter(99).String(); s != "full" {
		t.Errorf("Jitter(99).String() = %q; want full", s)
	}
}
