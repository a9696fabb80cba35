package analyzer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// fullJitterCV is the coefficient of variation of a uniform delay on [0, b]:
// the spread of waits that full jitter gives, the reference of waves.
var fullJitterCV = 1 / math.Sqrt(3)

// maxWaveIndex caps the waves figure (waits with no spread at all).
const maxWaveIndex = 1000

// defaultWaves is the waves check's default threshold, in × full
// jitter's concentration: ±p uniform jitter reads 1/p, so narrower than
// ±10% fails.
const defaultWaves = 10.0

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
		r := a.judge(c)
		r.ID, r.Unit = c.def.ID, c.def.Unit
		if r.Status == StatusSkip {
			r.Threshold = a.threshold(c)
		}
		// A check not run reports nothing it measured, only why.
		switch {
		case c.skipBy != "":
			r = CheckResult{ID: r.ID, Unit: r.Unit, Status: StatusSkip, Reason: "skipped by " + c.skipBy, Threshold: a.threshold(c)}
		case !c.selected:
			r = CheckResult{ID: r.ID, Unit: r.Unit, Status: StatusSkip, Reason: "not in the scenario's expect.checks", Threshold: a.threshold(c)}
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

// verdict fills status from figure and threshold: the one set, else def,
// the default in force (c.def.Threshold.Num unless derived from the run).
func verdict(c *checkCfg, figure, def float64, samples int64, reason string) CheckResult {
	thr := def
	if c.thrSet {
		thr = c.threshold
	}
	r := CheckResult{Status: StatusPass, Figure: figure, Threshold: thr, Samples: samples, Reason: reason}
	if figure > thr {
		r.Status = StatusFail
	}
	return r
}

func skip(reason string) CheckResult { return CheckResult{Status: StatusSkip, Reason: reason} }

// clockNote says, for the retry-after check's reason, that its tolerance
// holds the clock uncertainty of a merged timeline; "" when it has none.
func (a *Analyzer) clockNote() string {
	if a.raClock <= 0 {
		return ""
	}
	return fmt.Sprintf(" (the tolerance %s plus the clock uncertainty %s between the hosts this merged timeline joins: not_before and the retry may come from two clocks)",
		fmtDur(a.raTol-a.raClock), fmtDur(a.raClock))
}

func pct(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return 100 * float64(n) / float64(d)
}

func (a *Analyzer) judge(c *checkCfg) CheckResult {
	var r CheckResult
	switch c.def.ID {
	case CheckRetryAfter:
		if a.ra.judged == 0 {
			return skip("no retry followed a Retry-After that named a later instant")
		}
		r = verdict(c, float64(a.ra.bad), c.def.Threshold.Num, a.ra.judged, fmt.Sprintf("%d of %d retries after a usable Retry-After arrived more than %s before not_before%s",
			a.ra.bad, a.ra.judged, fmtDur(a.raTol), a.clockNote()))
		if a.ra.bad > 0 {
			r.Reason += fmt.Sprintf(" (worst: %s early)", fmtDur(a.ra.worst))
		}
		r.Examples = a.ra.ex
		// The host only makes a retry later: an early retry was early
		// (lo); one that arrived within the lateness p50 after the
		// earliest instant allowed may have been early too (hi).
		if late := a.noise().act(c.def.Noise, Lowers).bulk; late > 0 && a.raSlack != nil {
			hidden := int64(a.raSlack.Below(late))
			if hidden > 0 {
				r.Reason += fmt.Sprintf("; %d more arrived within the host's lateness p50 %s of it", hidden, fmtDur(late))
			}
			r = a.decide(c, float64(a.ra.bad), float64(a.ra.bad+hidden), c.def.Threshold.Num, a.ra.judged, r.Reason)
			r.Examples = a.ra.ex
		}
	case CheckInstantRetry:
		return a.judgeInstant(c)
	case CheckWaves:
		return a.judgeWaves(c, a.wvJ)
	case CheckNonRetryable:
		// Rate limits answered with a status of the set (a 403 with
		// Retry-After) are not in the population: retrying them is correct.
		if a.nonrSent == 0 {
			why := fmt.Sprintf("the server sent no %s", a.nonRetryList())
			if a.nonrLimited > 0 {
				why += fmt.Sprintf(" other than %d rate limits (retrying a rate limit is correct)", a.nonrLimited)
			}
			return skip(why)
		}
		why := fmt.Sprintf("retries after %d responses %s", a.nonrSent, a.nonRetryList())
		if a.nonrLimited > 0 {
			why += fmt.Sprintf("; %d rate limits with those statuses were not judged (retrying a rate limit is correct)", a.nonrLimited)
		}
		r = verdict(c, float64(a.nonr.bad), c.def.Threshold.Num, a.nonrSent, why)
		r.Examples = a.nonr.ex
	case CheckIdempotency:
		if a.idem.judged == 0 && a.idemReuse.judged == 0 {
			return skip("no POST or PATCH request was retried or carried an Idempotency-Key")
		}
		why := fmt.Sprintf("%d of %d POST/PATCH retries without the write's Idempotency-Key (%d carried none, %d a fresh key per attempt, %d one their first attempt lacked); %d of %d writes with a key sent a key another write had sent",
			a.idem.bad, a.idem.judged, a.idemNone, a.idemFresh, a.idemLate, a.idemReuse.bad, a.idemReuse.judged)
		if a.idemUnowned > 0 {
			why += fmt.Sprintf(" (%d writes past the first %d keys not compared)", a.idemUnowned, maxIdemOwners)
		}
		r = verdict(c, float64(a.idem.bad+a.idemReuse.bad), c.def.Threshold.Num, a.idem.judged+a.idemReuse.judged, why)
		r.Examples = append(append([]Example(nil), a.idemReuse.ex...), a.idem.ex...)
		if len(r.Examples) > a.maxEx {
			r.Examples = r.Examples[:a.maxEx]
		}
	case CheckAttempts:
		if a.attCap <= 0 {
			return skip("no stated max_attempts in the policy and no threshold")
		}
		if a.fig.Requests == 0 {
			return skip("no attempts in the timeline")
		}
		t := a.tl
		if a.fig.Requests-t.exclRequests <= 0 {
			return skip("no logical request to judge" + t.exclText())
		}
		r = verdict(c, float64(t.maxAtt), a.threshold(c), a.fig.Requests-t.exclRequests, fmt.Sprintf("most attempts any logical request used; %d requests exceeded %d%s", t.attBad, a.attCap, t.exclText()))
		r.Examples = t.attEx
	case CheckBudget:
		if a.meta != nil && a.meta.Recorder == "serve" {
			return skip("a serve recording has no client outcomes")
		}
		if a.fig.Outcomes == 0 {
			return skip("the timeline has no outcomes")
		}
		if a.bud.judged == 0 {
			return skip("no logical request failed (outcomes of the harness, canceled or past the cap are not judged)")
		}
		// Each wait of a request may have been made late by the host:
		// the range's low end credits it with the lateness per attempt.
		// An exec program's end is when its line was read: the reader's
		// lateness too.
		h := a.noise().act(c.def.Noise, Raises)
		reader := int64(0)
		if h.delay > 0 {
			reader = h.n.reader
		}
		overLo, _ := a.budOver.count(h.delay, reader)
		over, overEx := a.budOver.count(0, 0)
		why := fmt.Sprintf("failed logical requests that hung or ended more than %s past the %s budget (of %d failed)", fmtDur(a.budgetTol), fmtDur(a.budget), a.bud.judged)
		if a.budget <= 0 {
			why = fmt.Sprintf("failed logical requests that hung (of %d failed); no stated budget, so durations were not judged", a.bud.judged)
		}
		r = a.decide(c, float64(a.bud.bad+overLo), float64(a.bud.bad+over), c.def.Threshold.Num, a.bud.judged, why)
		r.Examples = append(append([]Example(nil), a.bud.ex...), overEx...)
		if len(r.Examples) > a.maxEx {
			r.Examples = r.Examples[:a.maxEx]
		}
	case CheckGiveUp:
		return a.judgeGiveUp(c)
	case CheckAmplification:
		if a.fig.Requests == 0 {
			return skip("no attempts in the timeline")
		}
		// Retries of a 502 the stub answered for a dead upstream or a
		// failed quota backend are the test environment's, not the
		// client's; requests the checks do not see (harness, canceled,
		// past the cap) are not counted either.
		t := a.tl
		env := a.fid.upRetries + a.fid.beRetries
		req := a.fig.Requests - t.exclRequests
		att := a.fig.Attempts - env - t.exclAttempts
		ret := att - req
		if req <= 0 {
			return skip("every logical request was canceled, past the cap or failed in the harness")
		}
		amp := float64(att) / float64(req)
		share := pct(ret, att)
		reason := fmt.Sprintf("%d attempts for %d logical requests; retries are %.1f%% of traffic", att, req, share)
		if env > 0 {
			reason += fmt.Sprintf(" (%d retries after upstream or quota-backend failures not counted)", env)
		}
		reason += t.exclText()
		r = verdict(c, amp, a.threshold(c), req, reason)
		if lim, ok := c.params["retry_share"]; ok {
			r.Reason += fmt.Sprintf(" (limit %.1f%%)", lim.num)
			if share > lim.num {
				r.Status = StatusFail
				r.Examples = []Example{{Detail: fmt.Sprintf("retries are %.1f%% of traffic; the limit is %.1f%%", share, lim.num)}}
			}
		}
		if r.Status == StatusFail && r.Examples == nil {
			r.Examples = []Example{{Detail: fmt.Sprintf("%.2f attempts per logical request; the limit is %.2f", amp, r.Threshold)}}
		}
	case CheckPacing:
		if a.meta == nil || a.meta.Quota == nil {
			return skip("no published quota")
		}
		if !a.pacingOn {
			return skip("self-throttling not expected: list pacing in expect.checks or pass --check pacing")
		}
		if a.pace.judged == 0 {
			return skip(fmt.Sprintf("no steady-state attempt in a quota phase (the first %s of each is warm-up)", fmtDur(a.warmup)))
		}
		why := fmt.Sprintf("%d of %d steady-state attempts in quota phases were rate-limited", a.pace.bad, a.pace.judged)
		if a.pace.bad > 0 {
			why += " (" + a.paceBy.String() + ")"
		}
		why += fmt.Sprintf("; the first %s of each phase is warm-up; the most restrictive published limit is %s", fmtDur(a.warmup), QuotaText(a.meta.Quota))
		r = verdict(c, pct(a.pace.bad, a.pace.judged), c.def.Threshold.Num, a.pace.judged, why)
		r.Examples = a.pace.ex
	case CheckJitterBounds:
		switch {
		case a.policy == nil:
			return skip("no stated policy")
		case a.policy.Base <= 0:
			return skip("the stated policy has no base delay")
		case !a.jbBounded:
			return skip("decorrelated jitter without a stated cap has no upper bound")
		case a.pacingOn:
			return skip("the client is expected to self-throttle, and its limiter's waits cannot be told from its backoff")
		case a.jb.judged == 0:
			return skip("no retry paced by the client's own backoff")
		}
		// A wait the host made late is not the policy's: the range's low
		// end credits it with the lateness.
		badLo, _ := a.jbOver.count(a.noise().act(c.def.Noise, Raises).delay, 0)
		bad, ex := a.jbOver.count(0, 0)
		r = a.decide(c, pct(badLo, a.jb.judged), pct(bad, a.jb.judged), c.def.Threshold.Num, a.jb.judged, fmt.Sprintf("%d of %d client-paced retries waited longer than min(cap, base·2^n) + %s", bad, a.jb.judged, fmtDur(a.jbTol)))
		if bad > 0 {
			r.Reason += fmt.Sprintf(" (worst: %s over)", fmtDur(a.jb.worst))
		}
		r.Examples = ex
	case CheckRecovery, CheckLoadAmplification, CheckWastedWork:
		if a.load == nil {
			return skip("the stub models no finite capacity (no meta.capacity)")
		}
		switch c.def.ID {
		case CheckRecovery:
			return a.recoveryRange(c)
		case CheckLoadAmplification:
			return a.loadAmpRange(c)
		default:
			return a.wastedRange(c)
		}
	}
	if c.def.ID == CheckPacing && r.Status != StatusSkip {
		// A paced client's requests bunched by the host's lateness draw
		// 429s from a bucket that cannot absorb the bunch: burst/rate is
		// how much lateness the quota absorbs. Past it, the host alone
		// may have made every rejection.
		q := a.meta.Quota
		absorbs := int64(float64(max(q.Burst, 1)) / q.Rate * 1e9)
		if late := a.noise().act(c.def.Noise, Raises).delay; q.Rate > 0 && late > absorbs {
			r.Reason += fmt.Sprintf("; the host's lateness p99 %s exceeds what the quota's burst absorbs (%d at %.4g/s: %s)", fmtDur(late), max(q.Burst, 1), q.Rate, fmtDur(absorbs))
			ex := r.Examples
			r = a.decide(c, 0, r.Figure, r.Threshold, r.Samples, r.Reason)
			r.Examples = ex
		}
	}
	return r
}

// threshold is a check's threshold before any data: the flag's or the
// scenario's, else the schema's default, or the stated policy's
// max_attempts for the two checks whose default derives from it (the
// instant-retry default may also rise with the stated policy once retries
// are seen).
func (a *Analyzer) threshold(c *checkCfg) float64 {
	if c.thrSet {
		return c.threshold
	}
	switch c.def.ID {
	case CheckAttempts:
		return float64(a.attCap)
	case CheckAmplification:
		if a.policy != nil && a.policy.MaxAttempts > 0 {
			return float64(a.policy.MaxAttempts)
		}
	}
	return c.def.Threshold.Num
}

func (a *Analyzer) nonRetryList() string {
	var s []string
	for st, on := range a.nonRetry {
		if on {
			s = append(s, strconv.Itoa(st))
		}
	}
	return strings.Join(s, ", ")
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

// The capacity checks' ranges. The stub's capacity is exact, but the
// host delivers responses late (clients give up on attempts it served in
// time), and a host short of CPU paces the stub itself and breaks up
// retries that would have arrived together (schema rows).

// recoveryFig is recovery's figure: seconds to recover, maxFigure when
// the overload outlived the offered load (metastable).
func recoveryFig(j *loadJudgement, r CheckResult) float64 {
	if r.Status != StatusSkip && !j.rec.Recovered {
		return maxFigure
	}
	return r.Figure
}

func (a *Analyzer) recoveryRange(c *checkCfg) CheckResult {
	r := a.judgeRecovery(a.ldJ)
	if r.Status == StatusSkip {
		return r
	}
	m := a.noise()
	h := m.act(c.def.Noise, Raises)
	if h.delay == 0 && !(h.starve && m.starvedFor(a.meta.Capacity.Service)) {
		return r
	}
	hi := recoveryFig(a.ldJ, r)
	// Late delivery: count as goodput the attempts served within the
	// attempt timeout whose clients had gone.
	lj := a.judgeLoad(true)
	lr := a.judgeRecovery(&lj)
	lo := recoveryFig(&lj, lr)
	if lr.Status == StatusSkip {
		lo = 0
	}
	why := r.Reason + fmt.Sprintf("; counting as goodput the %d attempts served within the %s attempt timeout whose clients had gone: %s", a.load.inTimeN, fmtDur(a.load.timeout), lr.Status)
	if h.starve && m.starvedFor(a.meta.Capacity.Service) {
		// A starved host may have kept the stub down alone, unless the
		// load after the trigger shows a storm of retries (a storm is
		// made of retries); lateness of the order of the service time
		// set the stub's capacity itself.
		switch amp := lj.after.mean(); {
		case m.p90 > 0 && 2*m.p90 >= a.meta.Capacity.Service:
			lo = 0
			why += fmt.Sprintf("; the host's lateness p90 %s is half the service time %s or more", fmtDur(m.p90), fmtDur(a.meta.Capacity.Service))
		case math.IsNaN(amp) || amp <= defaultLoadAmp:
			lo = 0
			why += "; the host was short of CPU and the load after the trigger was not amplified past " + fmtAmp(defaultLoadAmp)
		default:
			why += "; the load after the trigger was amplified " + fmtAmp(amp) + ": a storm of retries"
		}
	}
	ex := r.Examples
	out := a.decide(c, lo, hi, a.threshold(c), r.Samples, why)
	if out.Figure >= maxFigure {
		out.Figure = r.Figure // metastable: the time observed, a lower bound
	}
	if out.Status == StatusFail {
		out.Examples = ex
	}
	return out
}

// starvedRange is a capacity figure's range on a starved host: between
// the readings that undo the host's late delivery (alt) and as read
// (fig), and unbounded above unless the retries show their own spread
// from the trigger until until (clientSpread): the host's lateness breaks
// up lockstep waves, which lowers the figure. Lateness of the order of
// the service time leaves it [0, ∞].
func (a *Analyzer) starvedRange(fig, alt float64, until int64) (lo, hi float64, why string) {
	m := a.noise()
	if m.p90 > 0 && 2*m.p90 >= a.meta.Capacity.Service {
		return 0, maxFigure, fmt.Sprintf("the host's lateness p90 %s is half the stub's service time %s or more: the host, not the scenario, set its capacity", fmtDur(m.p90), fmtDur(a.meta.Capacity.Service))
	}
	lo, hi = fig, fig
	if !math.IsNaN(alt) {
		lo, hi = min(fig, alt), max(fig, alt)
	}
	if until <= 0 {
		until = math.MaxInt64
	}
	ok, how := a.clientSpread(a.ampFrom(), until, m.p90)
	if !ok {
		hi = maxFigure
	}
	return lo, hi, how
}

func (a *Analyzer) loadAmpRange(c *checkCfg) CheckResult {
	r := a.judgeLoadAmp(c, a.ldJ)
	m := a.noise()
	if r.Status == StatusSkip || !m.act(c.def.Noise, Both).starve || !m.starvedFor(a.meta.Capacity.Service) {
		return r
	}
	j := a.ldJ
	ex := r.Examples
	var lo, hi float64
	var how string
	if j.baselineOver {
		lo, hi, how = 0, maxFigure, "the server was not keeping up before the trigger: the host, not the scenario, overloaded it"
	} else {
		during := j.during.mean()
		lo, hi, how = a.starvedRange(r.Figure, during, j.ampUntil)
		how = fmt.Sprintf("read over the trigger alone: %s; %s", fmtAmp(during), how)
	}
	out := a.decide(c, lo, hi, r.Threshold, r.Samples, r.Reason+"; "+how)
	if out.Status == StatusFail {
		out.Examples = ex
	}
	return out
}

func (a *Analyzer) wastedRange(c *checkCfg) CheckResult {
	r := a.judgeWasted(c)
	m := a.noise()
	if r.Status == StatusSkip || !m.act(c.def.Noise, Both).starve || !m.starvedFor(a.meta.Capacity.Service) {
		return r
	}
	l := a.load
	lenient := pct(l.wasted-l.inTimeWasted, l.service)
	lo, hi, how := a.starvedRange(r.Figure, lenient, 0)
	ex := r.Examples
	out := a.decide(c, lo, hi, r.Threshold, r.Samples, r.Reason+fmt.Sprintf("; without the %s of service wasted on %d attempts served within the attempt timeout: %.1f%%; %s", fmtDur(l.inTimeWasted), l.inTimeN, lenient, how))
	if out.Status == StatusFail {
		out.Examples = ex
	}
	return out
}
