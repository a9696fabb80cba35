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
		// The host's noise can only make a retry later than the client
		// meant: it cannot make an honest client early, but it can carry
		// a retry that ignored Retry-After past not_before when it is as
		// long as the waits asked.
		if late := a.noiseLate(); late > 0 && r.Status != StatusFail && a.raAsked != nil {
			if med := a.raAsked.Quantile(0.5); 2*late >= med {
				r.Noise = fmt.Sprintf("%s is half or more of the median wait Retry-After asked (%s): a retry that ignored it could have been carried past not_before by the host", a.noiseText(), fmtDur(med))
			}
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
		if a.idem.judged == 0 {
			return skip("no POST or PATCH request was retried")
		}
		r = verdict(c, float64(a.idem.bad), c.def.Threshold.Num, a.idem.judged, fmt.Sprintf("%d of %d POST/PATCH retries carried no Idempotency-Key", a.idem.bad, a.idem.judged))
		r.Examples = a.idem.ex
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
		// the tolerance widens by the noise per attempt.
		late := a.noiseLate()
		over, overEx := a.budOver.count(late)
		tol := fmt.Sprintf("%s", fmtDur(a.budgetTol))
		if late > 0 {
			tol += fmt.Sprintf(" + %s per attempt (%s)", fmtDur(late), a.noiseText())
		}
		why := fmt.Sprintf("failed logical requests that hung or ended more than %s past the %s budget (of %d failed)", tol, fmtDur(a.budget), a.bud.judged)
		if a.budget <= 0 {
			why = fmt.Sprintf("failed logical requests that hung (of %d failed); no stated budget, so durations were not judged", a.bud.judged)
		}
		r = verdict(c, float64(a.bud.bad+over), c.def.Threshold.Num, a.bud.judged, why)
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
		// A wait the host made late is not the policy's: the tolerance
		// widens by the noise.
		late := a.noiseLate()
		bad, ex := a.jbOver.count(late)
		tol := fmtDur(a.jbTol)
		if late > 0 {
			tol += fmt.Sprintf(" + %s (%s)", fmtDur(late), a.noiseText())
		}
		r = verdict(c, pct(bad, a.jb.judged), c.def.Threshold.Num, a.jb.judged, fmt.Sprintf("%d of %d client-paced retries waited longer than min(cap, base·2^n) + %s", bad, a.jb.judged, tol))
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
			return a.judgeRecoveryUnderNoise()
		case CheckLoadAmplification:
			return a.loadAmpUnderNoise(c, a.judgeLoadAmp(c, a.ldJ))
		default:
			return a.wastedUnderNoise(c, a.judgeWasted(c))
		}
	}
	if c.def.ID == CheckPacing && r.Status != StatusSkip {
		// A paced client's requests bunched by the host's lateness draw
		// 429s from a bucket that cannot absorb the bunch: burst/rate is
		// how much lateness the quota absorbs.
		q := a.meta.Quota
		if late := a.noiseLate(); late > 0 && q.Rate > 0 && float64(late) > float64(max(q.Burst, 1))/q.Rate*1e9 {
			return a.noiseSkip(r, fmt.Sprintf("%s exceeds what the quota's burst absorbs (%d at %.4g/s: %s)", a.noiseText(), max(q.Burst, 1), q.Rate, fmtDur(int64(float64(max(q.Burst, 1))/q.Rate*1e9))))
		}
	}
	return r
}

// noiseSkip turns a check's result into a skip because of the host's
// noise, keeping what it read in the reason: noise may not decide it
// either way, so the verdict is INCONCLUSIVE.
func (a *Analyzer) noiseSkip(r CheckResult, why string) CheckResult {
	read := r.Status
	if r.Reason != "" {
		read += ": " + r.Reason
	}
	s := skip("not judged under this host's noise (it read " + read + ")")
	s.Noise = why
	return s
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

// judgeRecoveryUnderNoise is recovery, widened by the host's noise.
//
// The stub's capacity is exact, but the host delivers responses late:
// clients give up on responses the stub served within their attempt
// timeout, which reads as lost goodput — before the trigger as after it.
// Under measured noise a recovery that is not a PASS as recorded is
// judged again counting those attempts as goodput (loadState.inTime):
//
//   - a PASS then is the client's: the overload it did not recover from
//     was the host's late delivery (widen);
//   - a FAIL then is the client's too: its storm kept the stub's queue
//     past the attempt timeout, which no late delivery explains (a retry
//     budget keeps the storm the host may start from lasting);
//   - otherwise (nothing to judge) the result as recorded stands, a FAIL
//     under a noisy host not vouched for (noiseSkipIfCapacity).
//
// A PASS as recorded stands: recovery hangs on how many retries keep the
// queue full, and the host's lateness thins them only by its share of a
// retry's cycle (a few ms in tens). Unlike load-amplification, it does
// not hang on retries arriving together, which noise breaks up.
func (a *Analyzer) judgeRecoveryUnderNoise() CheckResult {
	r := a.judgeRecovery(a.ldJ)
	if r.Status == StatusPass {
		return r
	}
	if !a.noiseMeasured() {
		return r
	}
	lj := a.judgeLoad(true) // as recorded, when no in-time attempt was delivered late
	lr := a.judgeRecovery(&lj)
	widened := fmt.Sprintf("goodput counts the %d successful attempts the stub queued and served within the %s attempt timeout whose clients had gone (%s: the host delivered them late)",
		a.load.inTimeN, fmtDur(a.load.timeout), a.noiseText())
	if a.load.inTimeN == 0 {
		widened = fmt.Sprintf("no successful attempt the stub served within the attempt timeout was delivered too late (%s)", a.noiseText())
	}
	switch lr.Status {
	case StatusPass: // not when inTimeN is 0: as recorded, then
		lr.Reason += "; " + widened + "; as recorded: " + r.Status + ": " + r.Reason
		return lr
	case StatusFail:
		lr.Reason += "; " + widened + ", and it still fails"
		// Lateness of the order of the service time sets the stub's
		// capacity itself: nothing read then is the client's (at
		// load average 13-16 beside 4 CPU hogs, p90 7-8 ms against a
		// 10 ms service, the reference client FAILed metastable's
		// recovery in 2 of 10 runs, amplified 1.5-3.8x).
		if late := a.noiseBulk(); late > 0 && 2*late >= a.meta.Capacity.Service {
			return a.noiseSkipIfCapacity(lr)
		}
		// A storm is made of retries: an overload that outlived its
		// trigger with the load after it not amplified is the host's (a
		// fleet that never retries, on a host 16 CPU hogs starved; our
		// client beside one hog per core, 1.06× after the trigger and
		// 5.2× during it, back 8.4 s after it). The amplification
		// during the trigger says nothing of what kept the server down
		// after it.
		if amp := lj.after.mean(); amp > defaultLoadAmp {
			return lr
		}
		return a.noiseSkipIfCapacity(lr)
	}
	return a.noiseSkipIfCapacity(r)
}

// noiseSkipIfCapacity: on a noisy host the capacity checks do not vouch
// for what they read, either way. The stub's capacity itself is exact (a
// worker is free at its service's end whenever the stub notices), but
// the host delivers responses late: clients whose attempt timeout is of
// the order of the queueing delay give up on responses the stub served
// in time, retry, and keep the queue full — an overload the host made.
// And its lateness breaks up retries that would have arrived together: a
// lockstep fleet's waves no longer hit the full queue at once (at 2× the
// cores of CPU hogs, exp-no-jitter read load-amplification under its
// threshold in 2 of 10 metastable runs; without noise, 12×). Lateness of
// the order of the service time (2·p90) or a host short of CPU without
// waking anything late (PSI, metastable's reference run FAILed recovery
// at 49 % CPU pressure with a p99 of 8 ms; quiet, 8 %): INCONCLUSIVE.
// (Recovery first widens, judgeRecoveryUnderNoise.)
func (a *Analyzer) noiseSkipIfCapacity(r CheckResult) CheckResult {
	if r.Status == StatusSkip || !a.noiseMeasured() {
		return r
	}
	if late := a.noiseBulk(); late > 0 && 2*late >= a.meta.Capacity.Service {
		return a.noiseSkip(r, fmt.Sprintf("%s: its p90 is half or more of the stub's mean service time %s: the host, not the scenario, set its capacity", a.noiseText(), fmtDur(a.meta.Capacity.Service)))
	}
	if p := a.fid.end.Noise.CPUPressure; p >= maxCapacityPressure {
		return a.noiseSkip(r, fmt.Sprintf("the host's CPU was contended for %.0f%% of the run (PSI, %.0f%% at most): the host, not the scenario, set the stub's capacity", p, maxCapacityPressure))
	}
	return r
}

// capacityPressed reports whether the host's noise is of a size the
// capacity checks cannot read through as they are (see
// noiseSkipIfCapacity), and why ("" when it is not).
func (a *Analyzer) capacityPressed() string {
	if !a.noiseMeasured() {
		return ""
	}
	if p := a.fid.end.Noise.CPUPressure; p >= maxCapacityPressure {
		return fmt.Sprintf("the host's CPU was contended for %.0f%% of the run (PSI, %.0f%% at most)", p, maxCapacityPressure)
	}
	return ""
}

// pressedRead is where a capacity check read twice under CPU pressure
// starts: twice is false when r stands as it is (skipped, no noise
// measured, a host not short of CPU) or is settled by lateness of the
// order of the service time (noiseSkipIfCapacity); why says what pressed.
func (a *Analyzer) pressedRead(r CheckResult) (_ CheckResult, why string, twice bool) {
	if r.Status == StatusSkip || !a.noiseMeasured() {
		return r, "", false
	}
	if late := a.noiseBulk(); late > 0 && 2*late >= a.meta.Capacity.Service {
		return a.noiseSkipIfCapacity(r), "", false
	}
	why = a.capacityPressed()
	return r, why, why != ""
}

// loadAmpUnderNoise: load-amplification on a host short of CPU. Its
// window runs from the trigger to the recovery, and the host's late
// delivery moves the recovery later: the window takes in the first
// attempts of a recovering fleet, near 1× each, and the figure thins (at
// 2× the cores of CPU hogs, exp-no-jitter read 3.6× over a window whose
// recovery came 3.4 s late, 16.4× over the trigger itself; quiet, 12-15×
// and 14.6×). The trigger's own span is fixed by the scenario, not by the
// host. So under CPU pressure a result stands only when the trigger's
// span alone reads the same, and not when the server was not keeping up
// before the trigger (the host, not the scenario, overloaded it: a fleet
// that asks for less than the capacity at rest got none of it).
//
// A PASS needs more: the host's lateness also breaks up retries that
// would have arrived together, so a lockstep fleet's waves no longer hit
// the full queue at once, which lowers the figure on both readings alike
// (beside one CPU hog per core, exp-no-jitter read 3.9× and 6.6× over
// the trigger and its window alike, PSI 37-47%; 12× in virtual time; our
// client, 2.2-5.2×, 4.7×). It stands when the retries show that the
// clients spread them themselves (clientSpread): then there were no
// waves for the host to break up. Lateness of the order of the service
// time skips it as before (noiseSkipIfCapacity).
func (a *Analyzer) loadAmpUnderNoise(c *checkCfg, r CheckResult) CheckResult {
	r, why, twice := a.pressedRead(r)
	if !twice {
		return r
	}
	j := a.ldJ
	if j.baselineOver {
		return a.noiseSkip(r, why+", and the server was not keeping up before the trigger: the host, not the scenario, overloaded it")
	}
	during := j.during.mean()
	if math.IsNaN(during) {
		return a.noiseSkip(r, why+", and no first attempt arrived during the trigger to read it over")
	}
	d := verdict(c, during, c.def.Threshold.Num, j.during.first, "")
	if d.Status != r.Status {
		return a.noiseSkip(r, fmt.Sprintf("%s: over the trigger alone it reads %s (mean %s), over the window to the recovery %s: the host's late delivery moved the recovery, and the window with it", why, d.Status, fmtAmp(during), r.Status))
	}
	r.Reason += fmt.Sprintf("; %s: read over the trigger alone too (mean %s), the same: the host's lateness, which moves the recovery, does not decide it", why, fmtAmp(during))
	return a.vouchPass(r, why, j.ampUntil)
}

// vouchPass: under CPU pressure a capacity check's PASS stands only when
// the clients spread their own retries from the trigger until until (ns;
// 0: the run's end), clientSpread. The host's lateness breaks up retries
// that would have arrived together, so a lockstep fleet's waves no longer
// hit the full queue at once: fewer rejections, fewer retries, less work
// served for clients that had gone. Anything but a PASS stands as it is.
func (a *Analyzer) vouchPass(r CheckResult, why string, until int64) CheckResult {
	if r.Status != StatusPass {
		return r
	}
	if until <= 0 {
		until = math.MaxInt64
	}
	ok, how := a.clientSpread(a.ampFrom(), until, a.hostLateness())
	if !ok {
		return a.noiseSkip(r, why+": its lateness breaks up retries that would have arrived together, which lowers the figure: a lockstep fleet's PASS would be the host's; "+how)
	}
	r.Reason += "; " + how
	return r
}

// wastedUnderNoise: wasted-work on a host short of CPU. The host's late
// delivery wastes work the stub did in time: clients give up on
// responses it served within their attempt timeout (loadState.inTime).
// Read again without that work, a result the same on both readings
// stands: what the host added does not decide it; otherwise it is not
// vouched for. A PASS also needs the clients to have spread their own
// retries (vouchPass): lockstep waves the host broke up waste less.
// Lateness of the order of the service time skips it as before
// (noiseSkipIfCapacity).
func (a *Analyzer) wastedUnderNoise(c *checkCfg, r CheckResult) CheckResult {
	r, why, twice := a.pressedRead(r)
	if !twice {
		return r
	}
	l := a.load
	lenient := pct(l.wasted-l.inTimeWasted, l.service)
	d := verdict(c, lenient, c.def.Threshold.Num, l.servedN, "")
	if d.Status != r.Status {
		return a.noiseSkip(r, fmt.Sprintf("%s: without the %s of service the host's late delivery wasted (%d attempts served within the attempt timeout whose clients had gone) it reads %s (%.1f%%)", why, fmtDur(l.inTimeWasted), l.inTimeN, d.Status, lenient))
	}
	r.Reason += fmt.Sprintf("; %s: without the %s of service the host's late delivery wasted it reads the same (%.1f%%)", why, fmtDur(l.inTimeWasted), lenient)
	return a.vouchPass(r, why, 0)
}

// maxCapacityPressure is the CPU pressure (Linux PSI "some", % of the
// run) from which the capacity checks stop vouching.
const maxCapacityPressure = 25.0
