package analyzer

import (
	"strings"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
	"github.com/retrylab/retrylab/timeline"
)

// Verdict values, the value of Verdict.Status.
const (
	VerdictPass         = "pass"
	VerdictFail         = "fail"
	VerdictInconclusive = "inconclusive"
)

// Fidelity bounds: how far the harness may fall behind the fleet it was
// asked to drive before the analyzer stops vouching for the run.
const (
	// minLatenessBound is the least start lateness (p99) that makes a run
	// unfaithful: well above what a loaded host adds, well below the
	// seconds of a host that cannot drive its fleet
	// (docs/design/noise.md#the-fleets-lateness-bound).
	minLatenessBound = int64(250 * time.Millisecond)
	// latenessPhaseShare: beyond minLatenessBound, start lateness may reach
	// this share of the shortest timed phase before the fleet no longer
	// meets the phases the scenario wrote.
	latenessPhaseShare = 0.2
)

// latencyHist is a log-scale histogram of non-negative durations in
// internal/loghist's buckets, eight per power of two from 1 µs: a quantile
// read at its bucket's upper edge is at most 1/8 above the exact one.
type latencyHist struct{ h *loghist.Hist }

var latencyLayout = loghist.Layout{Unit: int64(time.Microsecond), Bits: 3}

func (l *latencyHist) add(ns int64) {
	if l.h == nil {
		l.h = loghist.New(latencyLayout)
	}
	l.h.Add(ns)
}

// count is the number of durations added.
func (l *latencyHist) count() uint64 {
	if l.h == nil {
		return 0
	}
	return l.h.N()
}

// quantile returns the upper edge of the bucket holding quantile q (0
// when empty).
func (l *latencyHist) quantile(q float64) int64 {
	if l.h == nil {
		return 0
	}
	return latencyLayout.Upper(l.h.QuantileBucket(q))
}

// fidelity is what the analyzer learns about the run behind the timeline.
type fidelity struct {
	end       *timeline.End
	harness   int64  // outcomes the harness or the subject's plumbing failed
	harnessEx string // the first one's error
	lateness  latencyHist
	// upstream counts attempts whose upstream failed (the stub proxied
	// them and answered 502 itself); upRetries the retries after them,
	// which no pairwise check judged.
	upstream, upRetries int64
	upstreamEx          string
	// backend counts attempts the stub answered 503 itself because its
	// quota backend failed (timeline.BackendClosed); beRetries the retries
	// after them, which no pairwise check judged.
	backend, beRetries int64
	backendEx          string
}

// maxBackendShare is the share of attempts (%) the stub may answer for a
// failed quota backend before the run is INCONCLUSIVE: a stray timeout of
// a loaded Redis is the environment's, and the retries after it are not
// judged; more is a test of the backend, not of the client.
const maxBackendShare = 1.0

// isExec reports whether a subject name is an exec program's.
func isExec(subject string) bool { return subject == "exec" || strings.HasPrefix(subject, "exec:") }
