package analyzer

import (
	"fmt"
	"slices"
	"time"
)

// Whose spread: the evidence that lets load-amplification and
// wasted-work vouch for a PASS on a host short of CPU (their schema rows).
// The host's lateness breaks up retries that would have arrived together,
// so a lockstep fleet's figure falls and cannot be told from a fleet that
// spreads its own retries. The retries can tell: jittered waits have, in
// every cohort, a fastest tenth that waited a small share of the median
// (full jitter: a fifth), and lateness only raises that share; lockstep
// waits d + L read (d + L₁₀)/(d + L₅₀), near 1 unless L is of the order of
// d. A cohort whose clients claim their waits (claims.go) is read on the
// claims, which the host's lateness is not in: the ratio to the lateness
// does not apply. The constants and the readings behind them:
// docs/design/capacity.md#whose-spread.
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
	// the host's lateness); a lockstep fleet is decided by the cohorts
	// that are read.
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
	onArrivals := false // a cohort read was read on its arrivals, not on claims
	m := a.noise()
	for g := range a.wv.cohorts {
		c := &a.wv.cohorts[g]
		// A cohort whose clients claim their waits consistently is read
		// on the claims (claimedSample): the spread is theirs, whatever
		// the host's lateness, so the lateness needs no margin.
		cl := claimedSample(c.sample, a.claimLate(m))
		src := c.sample
		if cl != nil {
			src = cl
		}
		var in []waveSampleRec
		for _, x := range src {
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
		if cl == nil && q50 < spreadLateRatio*late || q50 <= 0 {
			unread += n
			continue
		}
		name := (&cohortReading{g: g}).name()
		share := float64(q10) / float64(q50)
		if share > spreadShare {
			return false, fmt.Sprintf("the host's lateness may have spread the retries: %s's fastest tenth waited %s, %.0f%% of its median %s (a fleet that spreads its own waits: %.0f%% at most)",
				name, fmtDur(q10), 100*share, fmtDur(q50), 100*spreadShare)
		}
		res := max(q50/waveBins, int64(time.Millisecond))
		if cl == nil {
			res = max(res, late)
		}
		if _, arr := pairReadings(in, q50, res); arr > spreadArrivals {
			return false, fmt.Sprintf("the host's lateness may have spread the retries: %s's arrivals read %.2f on the waves statistic (%.0f at most), concentrated beyond what its waits explain",
				name, arr, float64(spreadArrivals))
		}
		if share > worst.share {
			worst.name, worst.share, worst.q10, worst.q50 = name, share, q10, q50
		}
		if cl == nil {
			onArrivals = true
		}
	}
	if total == 0 {
		return true, "no retry arrived from the trigger to the end of the window: there were no waves for the host's lateness to break up"
	}
	if unread > spreadUnread*total {
		return false, fmt.Sprintf("%.0f%% of the %.0f retries from the trigger on lie in cohorts whose waits cannot be told from the host's lateness (a median under %d× its p90 %s, or under %d sampled): whose spread they have is unknown",
			100*unread/total, total, spreadLateRatio, fmtDur(late), spreadMinSample)
	}
	basis := "on their clients' wait claims, each consistent with its arrival"
	if onArrivals {
		basis = fmt.Sprintf("a median at least %d× the host's lateness p90 %s", spreadLateRatio, fmtDur(late))
	}
	return true, fmt.Sprintf("the clients spread their own retries: in every retry cohort read (%.0f%% of the %.0f retries from the trigger on), the fastest tenth waited at most %.0f%% of the median (worst: %s, %s of %s), %s, with arrivals no more concentrated than the waits explain; there were no waves for the host to break up",
		100*(total-unread)/total, total, 100*worst.share, worst.name, fmtDur(worst.q10), fmtDur(worst.q50), basis)
}

// ampFrom is where load-amplification's window starts: the first
// trigger's start (ns since the run's start).
func (a *Analyzer) ampFrom() int64 {
	if spans := TriggerSpans(a.meta); len(spans) > 0 {
		return spans[0].Start
	}
	return 0
}
