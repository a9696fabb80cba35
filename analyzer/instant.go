package analyzer

import (
	"fmt"
	"math"
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
// Noise: a retry the client sent at once arrives as late as the host ran
// it, so the window widens by the measured noise (a retry within window +
// noise may be an instant one made late). The expected share widens with
// it; a cohort whose policy would put 80 % or more of its retries in the
// widened window cannot be told from an instant retry at all, and is not
// judged (the check notes it, and the verdict cannot pass on it).

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
}

// instantRetry feeds the gap of retry k after an unpaced retryable
// response; it reports whether it came within the window.
func (a *Analyzer) instantRetry(k int, gap int64) bool {
	c := &a.instK[min(k, waveGroups)-1]
	c.n++
	if c.gaps == nil {
		c.gaps = loghist.New(instLayout)
	}
	c.gaps.Add(gap)
	if gap < a.instWindow {
		c.bad++
		return true
	}
	return false
}

// instReading is one judged pool of retries.
type instReading struct {
	name      string
	n, bad    int64
	share     float64 // %
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

// judgeInstant is the instant-retry check.
func (a *Analyzer) judgeInstant(c *checkCfg) CheckResult {
	var total, bad int64
	for i := range a.instK {
		total += a.instK[i].n
	}
	if total == 0 {
		return skip("no retry followed a 429/5xx or other rate limit without a Retry-After that paced it")
	}
	policy := a.policy != nil && a.policy.Base > 0
	// The stub stamps a response before it leaves and an arrival when it
	// is read, so host noise only lengthens a gap: a retry within the
	// window was within it. With a stated policy the window widens by the
	// noise, and the expected shares with it; without one there is no
	// share to widen, so the window stays and the check notes that an
	// instant retry made late could have passed it.
	late := a.noiseLate()
	if !policy {
		late = 0
	}
	w := a.instWindow + late
	within := func(k int) int64 {
		ck := &a.instK[k]
		if late == 0 {
			return ck.bad
		}
		return int64(ck.gaps.Below(w))
	}
	var readings []instReading
	var unresolved []string
	var poolExp float64
	for k := range a.instK {
		ck := &a.instK[k]
		if ck.n == 0 {
			continue
		}
		b := within(k)
		bad += b
		// Without a stated policy there is no expected share: half (no
		// opinion) per retry number, so a cohort mostly at zero fails.
		p := 0.5
		if policy {
			p = a.instantProb(k+1, w)
		}
		poolExp += p * float64(ck.n)
		if ck.n < instMinCohort {
			continue
		}
		name := fmt.Sprintf("retry %d", k+1)
		if k+1 == waveGroups {
			name = fmt.Sprintf("retries %d+", k+1)
		}
		if policy && 100*p+10 >= 90 {
			if late > 0 && 100*a.instantProb(k+1, a.instWindow)+10 < 90 {
				unresolved = append(unresolved, name)
			}
			continue
		}
		rd := instReading{name: name, n: ck.n, bad: b, share: pct(b, ck.n), expect: -1, threshold: instantThreshold(c.def.Threshold.Num, p, ck.n)}
		if policy {
			rd.expect = 100 * p
		}
		readings = append(readings, rd)
	}
	// The pool of every retry, against the policy's pooled share (or the
	// default without a policy).
	pool := instReading{name: "all retries", n: total, bad: bad, share: pct(bad, total), expect: -1, threshold: c.def.Threshold.Num}
	if policy {
		p := poolExp / float64(total)
		pool.expect, pool.threshold = 100*p, instantThreshold(c.def.Threshold.Num, p, total)
		if 100*p+10 >= 90 {
			pool.threshold = -1 // the policy itself retries within the window
		}
	}
	worst := pool
	if pool.threshold < 0 {
		worst = instReading{}
	}
	for _, r := range readings {
		if worst.n == 0 || r.share-r.threshold > worst.share-worst.threshold {
			worst = r
		}
	}
	win := fmtDur(a.instWindow)
	if late > 0 {
		win = fmt.Sprintf("%s + %s of %s = %s", fmtDur(a.instWindow), fmtDur(late), a.noiseText(), fmtDur(w))
	}
	if worst.n == 0 {
		r := skip(fmt.Sprintf("the stated policy's own jitter puts most retries within %s: an instant retry cannot be told from it", win))
		if len(unresolved) > 0 {
			r.Noise = fmt.Sprintf("%s: within the widened window the policy's jitter cannot be told from an instant retry", a.noiseText())
		}
		return r
	}
	why := fmt.Sprintf("worst: %s, %d of %d came within %s", worst.name, worst.bad, worst.n, win)
	if worst.expect >= 0 {
		why += fmt.Sprintf("; the stated policy's jitter gives %.1f%%", worst.expect)
	}
	why += fmt.Sprintf(" (all retries: %d of %d after a 429/5xx or other rate limit without a usable Retry-After", bad, total)
	if len(readings) > 0 {
		why += fmt.Sprintf("; %d retry numbers judged apart", len(readings))
	}
	why += ")"
	r := verdict(c, worst.share, worst.threshold, total, why)
	r.Examples = a.inst.ex
	switch {
	case r.Status == StatusFail:
	case len(unresolved) > 0:
		r.Noise = fmt.Sprintf("%s: %v not judged (the policy's jitter within the widened window cannot be told from an instant retry)", a.noiseText(), unresolved)
	case !policy && a.noiseLate() >= a.instWindow:
		r.Noise = fmt.Sprintf("%s reaches the %s window, and without a stated policy the window cannot widen: an instant retry the host made late could have passed it", a.noiseText(), fmtDur(a.instWindow))
	}
	return r
}
