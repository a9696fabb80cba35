package analyzer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// Result judges what was added so far.
func (a *Analyzer) Result() *Verdict {
	a.tl = a.tallyAll()
	a.wvJ = a.judgeCohorts()
	if a.load != nil {
		j := a.judgeLoad(false)
		a.ldJ = &j
	}
	defer func() { a.wvJ, a.ldJ, a.tl = nil, nil, nil }()
	v := &Verdict{Figures: a.fig}
	failed := false
	f := &v.Figures
	f.ServerPaced, f.ClientPaced = a.wvJ.serverPaced, a.wvJ.clientPaced
	if a.seen {
		f.Span = a.now - a.first
	}
	if len(a.results) > 0 {
		f.Results = make(map[string]int64, len(a.results))
		for k, n := range a.results {
			f.Results[k] = n
		}
	}
	for s, n := range a.statuses {
		if n > 0 {
			if f.Statuses == nil {
				f.Statuses = make(map[string]int64)
			}
			f.Statuses[strconv.Itoa(s)] = n
		}
	}
	for k, n := range a.faults {
		if f.Statuses == nil {
			f.Statuses = make(map[string]int64)
		}
		f.Statuses[k] = n
	}
	for _, c := range a.cfg {
		var r CheckResult
		switch {
		case c.skipBy != "":
			r = CheckResult{Status: StatusSkip, Reason: "skipped by " + c.skipBy}
		case !c.selected:
			r = CheckResult{Status: StatusSkip, Reason: "not in the scenario's expect.checks"}
		default:
			r = c.chk.result()
		}
		r.ID, r.Unit = c.def.ID, c.def.Unit
		if r.Status == StatusSkip {
			// A check that judged nothing reports nothing it measured,
			// only why.
			r = CheckResult{ID: r.ID, Unit: r.Unit, Status: StatusSkip, Reason: r.Reason, Threshold: a.threshold(c)}
		}
		if r.Status != StatusFail {
			r.Examples = nil
		} else {
			failed = true
		}
		v.Checks = append(v.Checks, r)
	}
	v.Warnings = append(v.Warnings, a.warnings...)
	if w := a.serverSyncWarning(a.wvJ); w != nil {
		v.Warnings = append(v.Warnings, *w)
	}
	v.Inconclusive = a.inconclusive(v)
	switch {
	case failed:
		v.Status = VerdictFail // a failure seen in part of a run is still a failure
	case len(v.Inconclusive) > 0:
		v.Status = VerdictInconclusive
	default:
		v.Status, v.Pass = VerdictPass, true
	}
	unpaired := a.unpaired
	for st := range a.keys.all() {
		for _, x := range st.att {
			if !x.prevDone {
				unpaired++
			}
		}
	}
	if unpaired > 0 {
		v.Warnings = append(v.Warnings, Warning{ID: WarnUnordered,
			Message: fmt.Sprintf("%d retries could not be paired with the attempt before them (records out of order, lost, or idle past %s); they were not judged by the pairwise checks", unpaired, fmtDur(a.idle))})
	}
	return v
}

// QuotaText describes a published limit for people: its name, how it is
// published and its sustained rate, its algorithm, burst, key and tier
// when stated: "minute: 300/1m (5/s), fixed-window, per client".
func QuotaText(q *timeline.Quota) string {
	if q == nil {
		return "none"
	}
	var b strings.Builder
	if q.Name != "" {
		b.WriteString(q.Name)
		if q.Tier != "" {
			b.WriteString(" of tier " + q.Tier)
		}
		b.WriteString(": ")
	}
	rate := strconv.FormatFloat(q.Rate, 'g', 4, 64) + "/s"
	switch {
	case q.Limit > 0 && q.Window == int64(time.Second):
		fmt.Fprintf(&b, "%d/s", q.Limit)
	case q.Limit > 0 && q.Window > 0:
		fmt.Fprintf(&b, "%d/%s (%s)", q.Limit, fmtWindow(q.Window), rate)
	default:
		b.WriteString(rate)
	}
	if q.Algorithm != "" {
		b.WriteString(", " + q.Algorithm)
	}
	if q.Burst > 0 {
		fmt.Fprintf(&b, ", burst %d", q.Burst)
	}
	if q.Key != "" && q.Key != "global" {
		b.WriteString(", per " + q.Key)
	}
	return b.String()
}

// fmtWindow prints a limit's window as it is published: 1s, 1m, 1h, 1d,
// 100ms, 90s.
func fmtWindow(ns int64) string {
	d := time.Duration(ns)
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}

// exclText says what the request-level checks left out, "" for nothing.
func (t *keyTally) exclText() string {
	if t.exclRequests == 0 {
		return ""
	}
	return fmt.Sprintf("; %d logical requests (%d attempts) of the harness, canceled or past the cap not counted", t.exclRequests, t.exclAttempts)
}

// tallyAll is the closed requests' tally plus that of the requests still
// open, without closing them (Result may be called again).
func (a *Analyzer) tallyAll() *keyTally {
	t := a.done
	t.attEx = append([]Example(nil), a.done.attEx...)
	t.lostEx = append([]Example(nil), a.done.lostEx...)
	for st := range a.keys.all() {
		a.tally(&t, st)
	}
	return &t
}

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
