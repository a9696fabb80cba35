package analyzer

import "time"

// Wait claims: a client may say, on each retry, how long it meant to wait
// after the previous answer (timeline.WaitHeader; the client package's
// ClaimWaits). The host can only make a retry later than its client meant,
// by at most what it can add to the answer's receipt and to the send. So a
// claim is consistent with its arrival when the arrival is not earlier
// than the claim puts it, nor later by more than twice the most lateness
// known (claimLate). Where every sampled retry of a cohort claims
// consistently, the waves readings and the capacity checks' spread are
// read on the claims: the client's own waits, with the host's part out.
// One inconsistent claim (or a missing one) and the cohort is read on its
// arrivals, with the range the noise model gives.

const (
	// claimSkew is how much earlier than its claim a retry may arrive:
	// the client times its wait from its own receipt of the answer, a
	// little after the stub stamped it, and clocks round.
	claimSkew = int64(time.Millisecond)
	// claimTail is the share of a cohort's sampled retries that may be
	// left out of a read on claims, missing or inconsistent: a stub that
	// reads a backlog numbers some attempts out of their client's order
	// (the pair is not the client's), and the largest lateness measured is
	// a sample's. Leaving out a twentieth cannot make a lockstep cohort read
	// spread.
	claimTail = 0.05
)

// claimedSample is sample with each arrival moved to where its client's
// claim puts it, when at most claimTail of the claims are missing or
// inconsistent with their arrivals (those retries are left out: a retry
// the stub numbered out of the client's order claims nothing, and the
// largest lateness known is a sample's); else nil. A trigger the client
// timed itself (a fault, an abandoned answer) began at its send, which the
// host may have delayed before the arrival: it allows late (the most
// lateness known, claimLate) of skew.
func claimedSample(sample []waveSampleRec, late int64) []waveSampleRec {
	bound := 2*late + claimSkew
	out := make([]waveSampleRec, 0, len(sample))
	for _, x := range sample {
		if x.meant < 0 { // noClaim, badClaim
			continue
		}
		skew := claimSkew
		if x.faultBase {
			skew += late
		}
		if d := x.arrival - x.meant; d >= -skew && d <= bound {
			x.arrival = x.meant
			out = append(out, x)
		}
	}
	if len(sample) == 0 || float64(len(sample)-len(out)) > claimTail*float64(len(sample)) {
		return nil
	}
	return out
}

// claimLate is the most lateness known of the run: the noise model's
// largest, or the most a first attempt arrived after the instant the
// fleet meant to start its request (the fleet's own sends, late behind a
// queue of runnable goroutines the meter's sleeper does not wait in).
func (a *Analyzer) claimLate(m hostNoise) int64 {
	return max(m.most, m.delay, a.firstLate)
}
