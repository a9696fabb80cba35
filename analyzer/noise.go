package analyzer

import (
	"fmt"

	"github.com/retrylab/retrylab/timeline"
)

// Host noise. A run measures how late its host ran things while it ran
// (timeline.End.Noise: the Go scheduler's latencies, a sleeping thread's
// and a probe process's lateness). Every check with a time window states
// how that lateness enters it (docs/checks.md, "noise"):
//
//   - it widens its window by the noise, when noise can only move
//     arrivals later than the client meant (instant-retry's window,
//     budget's and jitter-bounds' tolerances, give-up's budget);
//   - or, where the noise is as large as what the check resolves (a
//     policy's jitter, Retry-After waits, a stub's service time, a
//     quota's burst), it does not vouch for what it saw: its result keeps
//     its status when it failed on events the noise cannot explain, and
//     otherwise notes the noise, which makes the verdict INCONCLUSIVE.
//
// So a verdict may be INCONCLUSIVE because of noise, never FAIL or PASS
// because of it. A virtual run has no noise (its clock waits for every
// goroutine), and a timeline without a measurement is judged as before.

// noiseLate is the lateness a check widens by, ns: the measured p99 (0
// when unmeasured).
func (a *Analyzer) noiseLate() int64 {
	if a.fid.end == nil {
		return 0
	}
	return a.fid.end.Noise.Late()
}

// noiseBulk is the lateness most events met, ns: the measured p90 (0
// when unmeasured). Checks that judge how events line up (waves) or how
// much work a stub got through (the capacity checks) read it: a stray
// late event does not smear a wave or halve a capacity.
func (a *Analyzer) noiseBulk() int64 {
	if a.fid.end == nil {
		return 0
	}
	return a.fid.end.Noise.Bulk()
}

// noiseMeasured reports whether the run measured its host's noise (a
// real-time run with an end record that carries it).
func (a *Analyzer) noiseMeasured() bool {
	return a.fid.end != nil && a.fid.end.Noise != nil
}

// noiseBatch is the most late arrivals the stub stamped at once
// (timeline.Noise.Batch; 0 when unmeasured).
func (a *Analyzer) noiseBatch() int {
	if a.fid.end == nil || a.fid.end.Noise == nil {
		return 0
	}
	return a.fid.end.Noise.Batch
}

// noiseText describes the measured noise for a reason: "host noise p99
// 12ms (sched+sleep)".
func (a *Analyzer) noiseText() string {
	n := a.fid.end.Noise
	if n == nil {
		return "no host noise measured"
	}
	if n.P90 > 0 {
		return fmt.Sprintf("host noise p90 %s, p99 %s (%s)", fmtDur(n.P90), fmtDur(n.P99), n.Source)
	}
	return fmt.Sprintf("host noise p99 %s (%s)", fmtDur(n.P99), n.Source)
}

// overList keeps the events a widened tolerance may excuse: for each, how
// far past its bound it was and how many waits of its own the host could
// have made late. Events that pass the bound before widening are never
// kept, so the list holds offenders only, bounded by maxOvers (past it,
// they count as offenders whatever the noise).
type overList struct {
	over     []int64
	waits    []int32
	ex       []Example // the example of each kept event, up to the example limit
	exIdx    []int     // index in over of each example
	overflow int64
}

const maxOvers = 1 << 16

func (l *overList) add(over int64, waits int, ex *Example, maxEx int) {
	if len(l.over) >= maxOvers {
		l.overflow++
		return
	}
	if ex != nil && len(l.ex) < maxEx {
		l.ex = append(l.ex, *ex)
		l.exIdx = append(l.exIdx, len(l.over))
	}
	l.over = append(l.over, over)
	l.waits = append(l.waits, int32(max(waits, 1)))
}

// count is how many kept events stay past their bound once each is
// allowed late ns per wait, with their examples.
func (l *overList) count(late int64) (n int64, ex []Example) {
	n = l.overflow
	j := 0
	for i, o := range l.over {
		if o > late*int64(l.waits[i]) {
			n++
			if j < len(l.exIdx) && l.exIdx[j] == i {
				ex = append(ex, l.ex[j])
			}
		}
		if j < len(l.exIdx) && l.exIdx[j] == i {
			j++
		}
	}
	return n, ex
}

// judgedOutcome is the one rule that decides which outcomes the checks
// of a client's logical requests (budget, give-up, attempts,
// amplification) see: not those the harness or the subject's plumbing
// failed, not those the run canceled, and not those that ended after the
// run's cap.
func (a *Analyzer) judgedOutcome(o *timeline.Outcome) bool {
	if o.Harness || o.Result == timeline.ResultCanceled {
		return false
	}
	if a.meta != nil && a.meta.Duration > 0 && o.End > a.meta.Duration {
		return false
	}
	return true
}
