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
//   - the high end reads the pairs within the resolution plus a width
//     the lateness may have smeared them apart by, over the least share
//     of pairs the lateness keeps within it (widenings: the tightest of
//     the widths its quantiles cut), and the spread
//     without the waits the host's tail may have lengthened and the
//     most variance the rest of its lateness can add (spreadHigh).
//
// On a quiet host both ends are the readings as read.

// spreadHigh is the most the spread reading of sample's own waits can
// be without the host's lateness: for a lateness x, the waits the host
// made later than x are at most its measured share beyond x (two
// standard errors over), taken out from the longest; the rest lost at
// most x²/4 of variance to it. The least over x of the p50, p90, p99
// and the most seen.
func (m hostNoise) spreadHigh(sample []waveSampleRec) float64 {
	own := make([]float64, len(sample))
	for i, x := range sample {
		own[i] = float64(x.own()) / 1e9
	}
	slices.Sort(own)
	n := len(own)
	best := float64(maxWaveIndex)
	for _, q := range []struct {
		x    int64
		tail float64
	}{{m.bulk, 0.5}, {m.p90, 0.1}, {m.delay, 0.01}, {max(m.most, m.delay), 0}} {
		k := 0
		if q.tail > 0 {
			k = int(math.Ceil(float64(n)*q.tail + 2*math.Sqrt(float64(n)*q.tail*(1-q.tail))))
		}
		if n-k < 2 {
			continue
		}
		var w welford
		for _, v := range own[:n-k] {
			w.add(v)
		}
		x := float64(q.x) / 1e9
		best = min(best, spreadOf(math.Sqrt(max(w.m2/float64(w.n)-x*x/4, 0)), w.mean))
	}
	return best
}

// widening is a width x the host's lateness may have smeared two
// arrivals apart by, and kept, the least share of pairs it leaves within
// x of each other.
type widening struct {
	x    int64
	kept float64
}

// widenings are the widths the high end of the pair readings tries: for
// each, the pairs within the resolution + x, over the share kept, bound
// the pairs the clients made within the resolution.
//
// Two lateness draws are within x of each other when both fall in one
// interval of width x. The measured quantiles cut the lateness into
// segments of known mass ([0, p50] 0.5, [p50, p90] 0.4, [p90, p99] 0.09,
// [p99, max] 0.01) whose mass inside is unknown: whole segments that fit
// in x together keep their mass squared; a longer one cut into k pieces
// keeps at least its mass squared over k. kept is the best such grouping.
func (m hostNoise) widenings() []widening {
	cuts := []int64{0, m.bulk, max(m.p90, m.bulk), max(m.delay, m.p90, m.bulk)}
	mass := []float64{0.5, 0.4, 0.09}
	if m.most >= cuts[3] {
		cuts, mass = append(cuts, m.most), append(mass, 0.01)
	}
	kept := func(x int64) float64 {
		best := make([]float64, len(mass)+1) // best[i]: segments before i grouped
		for i := 1; i <= len(mass); i++ {
			l := cuts[i] - cuts[i-1]
			k := 1.0
			if x > 0 && l > x {
				k = math.Ceil(float64(l) / float64(x))
			} else if x <= 0 && l > 0 {
				k = math.Inf(1)
			}
			best[i] = best[i-1] + mass[i-1]*mass[i-1]/k
			var sum float64
			for j := i; j >= 1 && cuts[i]-cuts[j-1] <= x; j-- {
				sum += mass[j-1]
				best[i] = max(best[i], best[j-1]+sum*sum)
			}
		}
		return best[len(mass)]
	}
	var out []widening
	for i := 1; i < len(cuts); i++ {
		for j := 0; j < i; j++ {
			x := cuts[i] - cuts[j]
			if x <= 0 || slices.ContainsFunc(out, func(w widening) bool { return w.x == x }) {
				continue
			}
			if k := kept(x); k > 0 {
				out = append(out, widening{x, k})
			}
		}
	}
	return out
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
	if cl := claimedSample(c.sample, a.claimLate(m)); cl != nil {
		// The clients' own waits, as they claim them: the host's part is
		// out of them, so the range is a point.
		var w welford
		for _, x := range cl {
			w.add(float64(x.own()) / 1e9)
		}
		r.claimed, r.mean = true, w.mean
		cm := int64(w.mean * 1e9)
		if cm <= floor {
			r.immediate, r.lo, r.hi = true, 1, 1
			return
		}
		r.res = max(cm/waveBins, 1_000_000)
		r.shape, r.arrivals = newPairNull(cl, cm, r.res).readings(cl, 1, 0, 1)
		r.spread = spreadOf(math.Sqrt(w.m2/float64(w.n)), w.mean)
		r.lo, r.hi = r.worst(), r.worst()
		return
	}
	if mean-m.delay <= floor {
		r.lo = min(r.lo, 1) // it may have had no own wait
	}
	shHi, arHi := float64(maxWaveIndex), float64(maxWaveIndex)
	for _, w := range m.widenings() {
		sh, ar := null.readings(c.sample, 1, w.x, w.kept)
		shHi, arHi = min(shHi, sh), min(arHi, ar)
	}
	r.hi = max(shHi, arHi, m.spreadHigh(c.sample), r.worst())
	r.lo = min(r.lo, r.hi)
}

// pairReadings computes the shape and arrivals readings of a sample whose
// mean own wait is m (ns), at resolution r (ns).
func pairReadings(sample []waveSampleRec, m, r int64) (shape, arrivals float64) {
	if len(sample) < 2 {
		return 1, 1
	}
	p := newPairNull(sample, m, r)
	return p.readings(sample, 1, 0, 1)
}

// closePairs counts the pairs of v (sorted in place) closer than r.
func closePairs(v []int64, r int64) int64 {
	slices.Sort(v)
	var n int64
	lo := 0
	for i := range v {
		for v[i]-v[lo] >= r {
			lo++
		}
		n += int64(i - lo)
	}
	return n
}

// triangleWithin is P(|d + U1 − U2| < r) for U1, U2 uniform on [0, a].
func triangleWithin(d, r, a float64) float64 {
	cdf := func(x float64) float64 { // of U1 − U2, triangular on [−a, a]
		switch {
		case x <= -a:
			return 0
		case x <= 0:
			return (x + a) * (x + a) / (2 * a * a)
		case x < a:
			return 1 - (a-x)*(a-x)/(2*a*a)
		}
		return 1
	}
	return cdf(r-d) - cdf(-r-d)
}

// ratio is real/null, 1 when both are (nearly) nothing, capped.
func ratio(real, null float64) float64 {
	if null < 1e-9 {
		if real == 0 {
			return 1
		}
		return maxWaveIndex
	}
	return min(real/null, maxWaveIndex)
}

// syncReading is how concentrated arrivals are relative to the responses
// that triggered them: pairs of arrivals within w over pairs of triggers
// within w.
func syncReading(sample []waveSampleRec, w int64) float64 {
	v := make([]int64, len(sample))
	for i, x := range sample {
		v[i] = x.arrival
	}
	arr := closePairs(v, w)
	for i, x := range sample {
		v[i] = x.trigger
	}
	trig := closePairs(v, w)
	if trig == 0 {
		if arr == 0 {
			return 0
		}
		return maxWaveIndex
	}
	return float64(arr) / float64(trig)
}
