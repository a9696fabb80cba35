package analyzer

import (
	"fmt"
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
	// unfaithful: a quiet 2-core machine starts a 200-client fleet within
	// 10 ms of schedule, the same machine loaded to 2× its cores within
	// 0.6 s, and one that cannot drive its fleet is late by seconds
	// (docs/design/noise.md).
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

// fidelityBackend notes an attempt the stub answered itself because its
// quota backend failed.
func (a *Analyzer) fidelityBackend(r *timeline.Attempt) {
	a.fid.backend++
	if a.fid.backendEx == "" {
		a.fid.backendEx = fmt.Sprintf("%s %s attempt %d at %s", strings.Clone(r.Method), strings.Clone(r.Path), r.Attempt, fmtNS(r.At))
	}
}

// maxBackendShare is the share of attempts (%) the stub may answer for a
// failed quota backend before the run is INCONCLUSIVE: a stray timeout of
// a loaded Redis is the environment's, and the retries after it are not
// judged; more is a test of the backend, not of the client.
const maxBackendShare = 1.0

// fidelityUpstream notes an attempt whose upstream gave no response.
func (a *Analyzer) fidelityUpstream(r *timeline.Attempt) {
	a.fid.upstream++
	if a.fid.upstreamEx == "" {
		a.fid.upstreamEx = fmt.Sprintf("%s %s attempt %d at %s", strings.Clone(r.Method), strings.Clone(r.Path), r.Attempt, fmtNS(r.At))
	}
}

func (a *Analyzer) addEnd(e *timeline.End) {
	c := *e
	c.Errors = append([]string(nil), e.Errors...)
	a.fid.end = &c
	if e.At > a.now {
		a.now = e.At
	}
}

// fidelityOutcome notes what one outcome says about the harness.
func (a *Analyzer) fidelityOutcome(o *timeline.Outcome) {
	if o.Harness {
		a.fid.harness++
		if a.fid.harnessEx == "" {
			a.fid.harnessEx = fmt.Sprintf("%s %s: %s", o.Client, o.Key, strings.Clone(o.Error))
		}
	}
	if o.Result != timeline.ResultCanceled || o.Start > 0 {
		a.fid.lateness.add(o.Start - o.Scheduled)
	}
}

// latenessBound is the start lateness (p99) above which the fleet did not
// run as scheduled: max(250 ms, 20 % of the shortest timed phase).
func (a *Analyzer) latenessBound() int64 {
	b := minLatenessBound
	if a.meta == nil {
		return b
	}
	shortest := int64(0)
	for _, ph := range a.meta.Phases {
		if d := ph.End - ph.Start; ph.End > 0 && d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	return max(b, int64(float64(shortest)*latenessPhaseShare))
}

// isExec reports whether a subject name is an exec program's.
func isExec(subject string) bool { return subject == "exec" || strings.HasPrefix(subject, "exec:") }

// needsOutcomes reports whether a check judges the fleet's outcomes, which
// a serve recording does not have.
func needsOutcomes(id string) bool { return id == CheckBudget || id == CheckGiveUp }

// inconclusive lists why the run behind the timeline was not carried out
// faithfully, in the order a reader should fix them; empty when it was.
func (a *Analyzer) inconclusive(v *Verdict) []string {
	var why []string
	add := func(format string, args ...any) { why = append(why, fmt.Sprintf(format, args...)) }
	m := a.meta
	fleetRun := m != nil && m.Recorder != "serve"

	if a.fig.Attempts == 0 {
		add("the timeline holds no attempt: nothing was judged")
	}
	if fleetRun {
		e := a.fid.end
		switch {
		case e == nil:
			add("the timeline has no end record: the run was killed or the file was cut short")
		case e.Reason == timeline.EndInterrupted:
			sig := e.Signal
			if sig == "" {
				sig = "a signal"
			}
			add("the run was interrupted by %s at %s with %d logical requests in flight and %d never started", sig, fmtNS(e.At), e.InFlight, e.Unstarted)
		case e.Reason == timeline.EndDuration && e.InFlight+e.Unstarted > 0:
			add("the duration cap stopped the run at %s with %d logical requests in flight and %d never started", fmtNS(e.At), e.InFlight, e.Unstarted)
		case e.Reason == timeline.EndWriteError:
			add("writing the timeline failed at %s: what followed was lost", fmtNS(e.At))
		case e.Reason == timeline.EndError:
			add("the harness failed at %s", fmtNS(e.At))
		}
		if e != nil {
			if e.DialErrors > 0 {
				add("the harness could not connect %d times (dial or accept errors, file descriptors exhausted)", e.DialErrors)
			}
			for _, s := range e.Errors {
				add("harness: %s", s)
			}
		}
		if m.Scheduled > 0 && a.fig.Outcomes < m.Scheduled {
			add("%d of %d scheduled logical requests have an outcome", a.fig.Outcomes, m.Scheduled)
		}
		if h := a.fid.harness; h > 0 {
			add("%d logical requests failed in the harness or the subject's plumbing, not in the library (first: %s)", h, a.fid.harnessEx)
		}
		if n := a.fid.lateness.count(); n > 0 {
			p99, bound := a.fid.lateness.quantile(0.99), a.latenessBound()
			if p99 > bound && !(m.Virtual && p99 <= 0) {
				add("the fleet started requests late: p99 %s after their scheduled instant, above the %s the scenario's phases tolerate (the machine could not drive this fleet)", fmtDur(p99), fmtDur(bound))
			}
		}
	}
	if b := a.fid.backend; b > 0 && pct(b, a.fig.Attempts) > maxBackendShare {
		add("%d of %d attempts (%.1f%%, above %.0f%%) were answered 503 by the stub itself because its quota backend failed (first: %s): the test environment failed, not the client, and the %d retries after them were not judged",
			b, a.fig.Attempts, pct(b, a.fig.Attempts), maxBackendShare, a.fid.backendEx, a.fid.beRetries)
	}
	// Nothing exercised: no request refused or failed, so no retry logic
	// ran, unless the client's pacing under a quota was judged (a client
	// that paces well is never refused: that is what pacing tests).
	if pc := v.Check(CheckPacing); a.fig.Attempts > 0 && a.exercised == 0 && a.fid.upstream+a.fid.backend == 0 &&
		(pc == nil || pc.Status == StatusSkip) && (m == nil || m.Expect == nil || !m.Expect.AllowUnexercised) {
		add("no retry logic was exercised: the stub refused or failed none of the %d requests and no pacing was judged (a scenario that means it states expect.allow_unexercised)", a.fig.Attempts)
	}
	if u := a.fid.upstream; u > 0 {
		add("%d attempts met an upstream that gave no response, so the stub answered 502 itself (first: %s): the test environment failed, not the client, and the %d retries after them were not judged", u, a.fid.upstreamEx, a.fid.upRetries)
	}
	// The fleet must meet the scenario: a first phase that ended before the
	// first request arrived tested nothing.
	if m != nil && len(m.Phases) > 1 && a.seen {
		first := m.Phases[0]
		// The first arrival is the first arrival. An exec fleet's start
		// barrier (FleetReady: every process ready) is later than its
		// first request only if a process was late to start; a goroutine
		// fleet's schedule is not its readiness.
		arrived := a.first
		if e := a.fid.end; fleetRun && e != nil && e.FleetReady > arrived && isExec(m.Subject) {
			arrived = e.FleetReady
		}
		if first.End > 0 && arrived >= first.End {
			add("the fleet's first request arrived at %s, after the first phase (%s) ended at %s: the scenario was not played against it", fmtNS(arrived), first.Name, fmtNS(first.End))
		}
	}
	// Checks whose range under the host's noise straddles the threshold.
	for i := range v.Checks {
		if c := &v.Checks[i]; c.Status == StatusInconclusive {
			add("the check %s could not decide under this host's noise: %s", c.ID, c.Reason)
		}
	}
	// Checks that had to judge something.
	judged := 0
	for i := range v.Checks {
		c := &v.Checks[i]
		if c.Status != StatusSkip {
			judged++
			continue
		}
		// A serve recording has no outcomes: the checks that judge them
		// cannot be required of it (the scenario requires them of a run).
		if a.required[c.ID] && !(!fleetRun && needsOutcomes(c.ID)) {
			add("the required check %s judged nothing: %s", c.ID, c.Reason)
		}
	}
	if judged == 0 && len(v.Checks) > 0 && a.fig.Attempts > 0 {
		add("every check skipped: nothing was judged")
	}
	return why
}
