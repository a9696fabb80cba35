package analyzer

import (
	"math"
	"slices"
)

// Waves under the host's noise. The host adds to each wait a lateness of
// its own, drawn independently of the client's: that only smears pairs
// apart and adds variance, and a constant part of it narrows the spread
// relative to the mean. Batches stamped at one instant are the only way
// it brings arrivals together. So:
//
//   - the low end takes out the pairs batches can make (k·(k−1)/2 per
//     batch of k), and reads the spread over the mean less the lateness
//     p99: what the host cannot have made;
//   - the high end reads the pairs within the resolution plus the
//     lateness that may have smeared them apart (p99, for 98 % of the
//     pairs; or p90, for 81 %: the tighter of the two), and the spread
//     without the most variance the measured lateness can add.
//
// On a quiet host both ends are the readings as read.

// lateVarBound is the most variance the host's lateness can add, s²:
// E[(d − p50)²] with each quantile band at its far end (≥ Var(d)).
func (m hostNoise) lateVarBound() float64 {
	q := [...]float64{0, float64(m.bulk), float64(max(m.p90, m.bulk)), float64(max(m.delay, m.p90)), float64(max(m.most, m.delay))}
	med := q[1]
	v := 0.5*med*med + 0.4*(q[2]-med)*(q[2]-med) + 0.09*(q[3]-med)*(q[3]-med) + 0.01*(q[4]-med)*(q[4]-med)
	return v / 1e18
}

// pairNull is what the pair readings of a cohort compare with: the
// close pairs full jitter gives, fixed by the cohort's bases, its mean
// own wait and the resolution, so it is computed once per cohort.
type pairNull struct {
	r           int64
	shape, arrs float64 // null close pairs of the shape and arrivals readings
	v           []int64
}

func newPairNull(sample []waveSampleRec, m, r int64) *pairNull {
	n := len(sample)
	p := &pairNull{r: r, v: make([]int64, n)}
	pairs := float64(n) * float64(n-1) / 2
	a := 2 * float64(m)
	q := min(float64(r)/a, 1)
	p.shape = pairs * (1 - (1-q)*(1-q))
	for i, x := range sample {
		p.v[i] = x.base
	}
	slices.Sort(p.v)
	reach := int64(a) + r
	for i := range p.v {
		for k := i + 1; k < n && p.v[k]-p.v[i] < reach; k++ {
			p.arrs += triangleWithin(float64(p.v[k]-p.v[i]), float64(r), a)
		}
	}
	return p
}

// readings are the shape and arrivals readings of sample: its pairs
// within the resolution plus widen, less the pairs that batches of batch
// arrivals stamped at one instant can make, over the share kept of the
// pairs that were within the resolution (1: all).
func (p *pairNull) readings(sample []waveSampleRec, batch int, widen int64, kept float64) (shape, arrivals float64) {
	n := len(sample)
	batched := int64(n) * int64(max(batch, 1)-1) / 2
	v := p.v[:n]
	count := func() float64 { return float64(max(closePairs(v, p.r+widen)-batched, 0)) / kept }
	for i, x := range sample {
		v[i] = x.own()
	}
	shape = ratio(count(), p.shape)
	for i, x := range sample {
		v[i] = x.arrival
	}
	arrivals = ratio(count(), p.arrs)
	return shape, arrivals
}

// spreadOf is the spread reading of waits whose standard deviation is sd
// and mean mean.
func spreadOf(sd, mean float64) float64 {
	if mean <= 0 {
		return 1
	}
	if cv := sd / mean; cv > fullJitterCV/maxWaveIndex {
		return fullJitterCV / cv
	}
	return maxWaveIndex
}

// readCohort fills r's readings of cohort c, as read and as a range
// under the host's noise m (see above); floor is the own wait below
// which a cohort has none (instant-retry's business).
func (a *Analyzer) readCohort(r *cohortReading, c *waveCohort, floor int64, m hostNoise, batch int) {
	mean := int64(c.w.mean * 1e9)
	if mean <= floor {
		r.immediate = true
		return
	}
	r.res = max(mean/waveBins, 1_000_000) // 1 ms
	null := newPairNull(c.sample, mean, r.res)
	v := c.w.m2 / float64(c.w.n)
	r.shape, r.arrivals = null.readings(c.sample, 1, 0, 1)
	r.spread = spreadOf(math.Sqrt(v), c.w.mean)
	// Low end: what the host cannot have made.
	sh, ar := r.shape, r.arrivals
	if batch > 1 {
		sh, ar = null.readings(c.sample, batch, 0, 1)
	}
	r.lo = max(sh, ar, spreadOf(math.Sqrt(v), max(c.w.mean-float64(m.delay)/1e9, 0)))
	r.hi = r.worst()
	if m.delay == 0 {
		r.lo = min(r.lo, r.hi)
		return
	}
	if mean-m.delay <= floor {
		r.lo = min(r.lo, 1) // it may have had no own wait
	}
	sh99, ar99 := null.readings(c.sample, 1, m.delay, 0.98)
	sh90, ar90 := null.readings(c.sample, 1, max(m.p90, m.bulk), 0.81)
	sp := spreadOf(math.Sqrt(max(v-m.lateVarBound(), 0)), c.w.mean)
	r.hi = max(min(sh99, sh90), min(ar99, ar90), sp, r.worst())
	r.lo = min(r.lo, r.hi)
}
