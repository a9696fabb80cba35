package analyzer

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
)

// instant-retry, judged per retry number. A library whose first retries
// come at once and whose later ones back off would hide a burst at zero
// in a pool of all its retries (the later, backed-off ones dilute it), so
// like waves the check judges each cohort — the k-th retries of the
// logical requests (k = 1..15, 16+) — against the share the stated
// policy's jitter gives that retry number, and the figure is the worst
// cohort's. Without a stated policy there is no expected share per
// retry: each cohort is judged as if half its retries could be within
// the window (the default threshold, 50 %, plus the margin of a small
// cohort), and the pool of all retries against the default.
//
// Noise (schema row): the stub stamps a response before it leaves and an
// arrival when it is read, so the host only lengthens a gap. A retry
// within the window was within it (lo); at most all of those within the
// window plus a lateness x and a share P(lateness > x) of the others may
// have been (hi, the least over x of p50, p90, p99 and the most seen).

// instLayout buckets the retries' gaps: eight buckets per power of two
// of 100 µs.
var instLayout = loghist.Layout{Unit: int64(100 * time.Microsecond), Bits: 3}

// instMinCohort is the least number of retries a cohort needs to be
// judged on its own.
const instMinCohort = 10

// instCohort accumulates the k-th retries after an unpaced 429/5xx.
type instCohort struct {
	n    int64 // retries
	bad  int64 // within the window
	gaps *loghist.Hist
	// Wait claims (claims.go): a retry whose client claimed a wait within
	// the window confesses an instant retry (confessed: those whose gap
	// the host made longer); one that claimed a longer wait its gap bears
	// out was not one, unless the gap exceeds the claim by more than the
	// host's lateness allows (excess: gap − claim, read at result). The
	// others are read on their gaps alone (open: their gaps, nOpen).
	confessed, nOpen, openBad int64
	open, excess              *loghist.Hist
}

// add counts one retry of gap (ns) whose client claimed the wait claim
// (noClaim, badClaim: none), after an answer it saw (the stub stamped it)
// when seen.
func (c *instCohort) add(gap, claim, window int64, seen bool) {
	if c.gaps == nil {
		c.gaps, c.open, c.excess = loghist.New(instLayout), loghist.New(instLayout), loghist.New(instLayout)
	}
	c.n++
	c.gaps.Add(gap)
	if gap < window {
		c.bad++
	}
	switch {
	case claim < 0 || !seen || claim > gap+claimSkew:
		// No claim, one timed from an answer the stub did not stamp, or
		// one the gap contradicts.
		c.nOpen++
		c.open.Add(gap)
		if gap < window {
			c.openBad++
		}
	case claim < window:
		if gap >= window {
			c.confessed++
		}
	default:
		c.excess.Add(gap - claim)
	}
}

// known is how many retries of the cohort were within the window by
// their gap or their own claim.
func (c *instCohort) known() int64 { return c.bad + c.confessed }

// instantCheck is the instant-retry check's state: the retries after
// an unpaced retryable response, by retry number.
type instantCheck struct {
	checkBase
	n   counter
	byK [waveGroups]instCohort
}

func newInstant(b checkBase) checker { return &instantCheck{checkBase: b} }

func (ch *instantCheck) retry(f *retryFacts) {
	p := f.p
	if f.paced || !p.class.Retryable() {
		return
	}
	ch.n.judged++
	c := &ch.byK[min(f.k, waveGroups)-1]
	c.add(f.gap, f.x.claim, ch.a.instWindow, !p.fault)
	if f.gap >= ch.a.instWindow {
		return
	}
	if ch.hit(&ch.n) {
		what := strconv.Itoa(int(p.status))
		if p.class == ResponseRateLimit && p.status != 429 {
			what += " rate limit"
		}
		ch.n.ex = append(ch.n.ex, f.example(fmt.Sprintf("retry %d came %s after a %s without a usable Retry-After", f.k, fmtDur(f.gap), what)))
	}
}

// instReading is one judged pool of retries.
type instReading struct {
	name      string
	n         int64
	lo, hi    int64   // within the window; within it plus the host's lateness
	confessed int64   // of lo, by their clients' claims alone
	expect    float64 // % the policy gives, -1 without one
	threshold float64
}

// instantThreshold is the threshold of a pool of n retries of which the
// policy expects the share p (0..1) within the window: 10 points above
// it plus four standard errors of a share of n, at least the default
// def (50 %), at most 90 %.
func instantThreshold(def, p float64, n int64) float64 {
	margin := 400 * math.Sqrt(p*(1-p)/float64(max(n, 1)))
	return max(def, min(90, 100*p+10+margin))
}

// share is the reading's range in %.
func (r instReading) share() (lo, hi float64) { return pct(r.lo, r.n), pct(r.hi, r.n) }

// result judges every cohort (and the pool of all retries) against its
// threshold; the check fails when one cohort's range is all past it,
// passes when every range is within.
func (ch *instantCheck) result() CheckResult {
	a, c := ch.a, ch.cfg
	var total, bad, badHi int64
	for i := range ch.byK {
		total += ch.byK[i].n
	}
	if total == 0 {
		return skip("no retry followed a 429/5xx or other rate limit without a Retry-After that paced it")
	}
	policy := a.policy != nil && a.policy.Base > 0
	h := ch.act(Lowers)
	late := h.delay
	var readings []instReading
	var poolExp float64
	for k := range ch.byK {
		ck := &ch.byK[k]
		if ck.n == 0 {
			continue
		}
		lo, hi := ck.known(), ck.known()
		if late > 0 {
			// The open retries within the window are in known; the
			// hidden ones replace them.
			over := int64(ck.excess.N() - ck.excess.Below(2*a.claimLate(h.n)+claimSkew))
			hi = max(hi, ck.known()-ck.openBad+h.n.hiddenWithin(ck.open, a.instWindow, ck.nOpen)+over)
		}
		bad += lo
		badHi += hi
		// Without a stated policy there is no expected share: half (no
		// opinion) per retry number, so a cohort mostly at zero fails.
		p := 0.5
		if policy {
			p = a.instantProb(k+1, a.instWindow)
		}
		poolExp += p * float64(ck.n)
		if ck.n < instMinCohort || (policy && 100*p+10 >= 90) {
			continue // too few, or the policy itself retries within the window
		}
		name := fmt.Sprintf("retry %d", k+1)
		if k+1 == waveGroups {
			name = fmt.Sprintf("retries %d+", k+1)
		}
		rd := instReading{name: name, n: ck.n, lo: lo, hi: hi, confessed: ck.confessed, expect: -1, threshold: instantThreshold(c.def.Threshold.Num, p, ck.n)}
		if policy {
			rd.expect = 100 * p
		}
		readings = append(readings, rd)
	}
	// The pool of every retry, against the policy's pooled share (or the
	// default without a policy).
	pool := instReading{name: "all retries", n: total, lo: bad, hi: badHi, expect: -1, threshold: c.def.Threshold.Num}
	if policy {
		p := poolExp / float64(total)
		pool.expect, pool.threshold = 100*p, instantThreshold(c.def.Threshold.Num, p, total)
		if 100*p+10 >= 90 {
			pool.n = 0 // the policy itself retries within the window
		}
	}
	if pool.n > 0 {
		readings = append(readings, pool)
	}
	if len(readings) == 0 {
		return skip(fmt.Sprintf("the stated policy's own jitter puts most retries within %s: an instant retry cannot be told from it", fmtDur(a.instWindow)))
	}
	thr := func(r instReading) float64 {
		if c.thrSet {
			return c.threshold
		}
		return r.threshold
	}
	// The reading that decides: the one furthest past its threshold at
	// its low end if any is past (FAIL), else the one nearest at its high
	// end (PASS when within, else INCONCLUSIVE).
	most := func(end func(instReading) float64) instReading {
		best := readings[0]
		for _, r := range readings[1:] {
			if end(r)-thr(r) > end(best)-thr(best) {
				best = r
			}
		}
		return best
	}
	lowEnd := func(r instReading) float64 { lo, _ := r.share(); return lo }
	highEnd := func(r instReading) float64 { _, hi := r.share(); return hi }
	worst := most(lowEnd)
	if lowEnd(worst) <= thr(worst) {
		worst = most(highEnd)
	}
	why := fmt.Sprintf("worst: %s, %d of %d came within %s", worst.name, worst.lo, worst.n, fmtDur(a.instWindow))
	if worst.confessed > 0 {
		why = fmt.Sprintf("worst: %s, %d of %d came within %s or claimed a wait within it (%d by their claim alone)", worst.name, worst.lo, worst.n, fmtDur(a.instWindow), worst.confessed)
	}
	if worst.hi != worst.lo {
		why += fmt.Sprintf(" (%d of them may have been, under the host's lateness)", worst.hi)
	}
	if worst.expect >= 0 {
		why += fmt.Sprintf("; the stated policy's jitter gives %.1f%%", worst.expect)
	}
	why += fmt.Sprintf(" (all retries: %d of %d after a 429/5xx or other rate limit without a usable Retry-After", bad, total)
	if n := len(readings) - 1; n > 0 && pool.n > 0 {
		why += fmt.Sprintf("; %d retry numbers judged apart", n)
	}
	why += ")"
	lo, hi := worst.share()
	r := ch.decide(lo, hi, worst.threshold, total, why)
	r.Examples = ch.n.ex
	return r
}

// hiddenWithin is the most retries of n (their gaps in gaps) that may
// have come within the window w had the host not made them late: for a
// lateness x, those within w + x, and of the others at most the share
// the host makes later than x (its measured tail, plus two standard
// errors of a share of n); the least over x of its quantiles.
func (m hostNoise) hiddenWithin(gaps *loghist.Hist, w, n int64) int64 {
	best := n
	for _, q := range []struct {
		x    int64
		tail float64
	}{{m.bulk, 0.5}, {m.p90, 0.1}, {m.delay, 0.01}, {max(m.most, m.delay), 0}} {
		in := int64(gaps.Below(w + q.x))
		out := float64(n) * q.tail
		if q.tail > 0 {
			out += 2 * math.Sqrt(float64(n)*q.tail*(1-q.tail))
		}
		best = min(best, in+min(int64(math.Ceil(out)), n-in))
	}
	return best
}
