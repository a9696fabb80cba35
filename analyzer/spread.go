package analyzer

import (
	"fmt"
	"slices"
	"time"
)

// Whose spread: the evidence that lets the capacity checks
// (load-amplification, wasted-work) vouch for a PASS on a host short of
// CPU (vouchPass).
//
// The host's lateness breaks up retries that would have arrived together:
// a lockstep fleet's waves no longer hit a full queue at once, and its
// figure falls (beside one or two CPU hogs per core, exp-no-jitter read
// 3.2-6.6× where a quiet host reads 12-16×), so the figure alone cannot tell a
// lockstep fleet the host spread from a fleet that spreads its own
// retries. The retries can: a fleet that jitters its waits has, in every
// retry cohort, a fastest tenth that waited a small share of the median
// (full jitter: a fifth), and the host's lateness only raises that share;
// a fleet in lockstep waits its delay d plus the host's lateness L, a
// share of (d + L₁₀)/(d + L₅₀), near 1 unless the host's median lateness
// is of the order of d. So a cohort reads as the client's spread when its
// fastest tenth waited at most spreadShare of its median, that median is
// at least spreadLateRatio times the host's lateness (lateness of that
// size leaves a lockstep cohort at 75 % or more), and its arrivals are not
// concentrated beyond what its waits explain (the waves statistic's
// arrivals reading, which a clock-aligned fleet fails). Measured on the
// recordings of the gate (docs/benchmarks/gate-under-load.sh), metastable,
// the worst cohort's share: our client 0.30-0.38 quiet, 0.34-0.38 beside
// 2 hogs per core, 0.47-0.51 beside 8; exp-no-jitter 0.99, 0.97, 0.90-0.91.
const (
	// spreadShare: a cohort's fastest tenth waited at most this share of
	// its median.
	spreadShare = 0.6
	// spreadLateRatio: the cohort's median wait is at least this many
	// times the host's lateness (its p90) for the share to be read.
	spreadLateRatio = 4
	// spreadArrivals: the most the cohort's arrivals may read on the
	// waves statistic's arrivals reading (full jitter reads 1).
	spreadArrivals = 3
	// spreadMinSample: the fewest sampled retries a cohort is read on.
	spreadMinSample = 20
	// spreadUnread: the largest share of the window's retries that may
	// lie in cohorts not read (too few, or waits too short to tell from
	// the host's lateness). Our client's first two retries (full jitter
	// under 10 and 20 ms in metastable) held 3-10 % of them beside 2 CPU
	// hogs per core, 10 % once beside one per core with two runs at a
	// time; a lockstep fleet is decided by the cohorts that are read.
	spreadUnread = 0.15
)

// clientSpread tells whether the retries that arrived in [from, until)
// were spread by their clients, not by the host (see above), and says what
// it read either way. late is the host's lateness (ns, its p90).
func (a *Analyzer) clientSpread(from, until, late int64) (bool, string) {
	var total, unread float64
	var worst struct {
		name     string
		share    float64
		q10, q50 int64
	}
	worst.share = -1
	for g := range a.wv.cohorts {
		c := &a.wv.cohorts[g]
		var in []waveSampleRec
		for _, x := range c.sample {
			if x.arrival >= from && x.arrival < until {
				in = append(in, x)
			}
		}
		if len(in) == 0 {
			continue
		}
		n := float64(c.seen) * float64(len(in)) / float64(len(c.sample))
		total += n
		if len(in) < spreadMinSample {
			unread += n
			continue
		}
		own := make([]int64, len(in))
		for i, x := range in {
			own[i] = x.own()
		}
		slices.Sort(own)
		q10, q50 := own[len(own)/10], own[len(own)/2]
		if q50 < spreadLateRatio*late || q50 <= 0 {
			unread += n
			continue
		}
		name := (&cohortReading{g: g}).name()
		share := float64(q10) / float64(q50)
		if share > spreadShare {
			return false, fmt.Sprintf("the host's lateness may have spread the retries: %s's fastest tenth waited %s, %.0f%% of its median %s (a fleet that spreads its own waits: %.0f%% at most)",
				name, fmtDur(q10), 100*share, fmtDur(q50), 100*spreadShare)
		}
		res := max(q50/waveBins, int64(time.Millisecond), late)
		if _, arr := pairReadings(in, q50, res); arr > spreadArrivals {
			return false, fmt.Sprintf("the host's lateness may have spread the retries: %s's arrivals read %.2f on the waves statistic (%.0f at most), concentrated beyond what its waits explain",
				name, arr, float64(spreadArrivals))
		}
		if share > worst.share {
			worst.name, worst.share, worst.q10, worst.q50 = name, share, q10, q50
		}
	}
	if total == 0 {
		return true, "no retry arrived from the trigger to the end of the window: there were no waves for the host's lateness to break up"
	}
	if unread > spreadUnread*total {
		return false, fmt.Sprintf("%.0f%% of the %.0f retries from the trigger on lie in cohorts whose waits cannot be told from the host's lateness (a median under %d× its p90 %s, or under %d sampled): whose spread they have is unknown",
			100*unread/total, total, spreadLateRatio, fmtDur(late), spreadMinSample)
	}
	return true, fmt.Sprintf("the clients spread their own retries: in every retry cohort read (%.0f%% of the %.0f retries from the trigger on), the fastest tenth waited at most %.0f%% of the median (worst: %s, %s of %s), a median at least %d× the host's lateness p90 %s, with arrivals no more concentrated than the waits explain; there were no waves for the host to break up",
		100*(total-unread)/total, total, 100*worst.share, worst.name, fmtDur(worst.q10), fmtDur(worst.q50), spreadLateRatio, fmtDur(late))
}

// ampFrom is where load-amplification's window starts: the first
// trigger's start (ns since the run's start).
func (a *Analyzer) ampFrom() int64 {
	if spans := TriggerSpans(a.meta); len(spans) > 0 {
		return spans[0].Start
	}
	return 0
}
