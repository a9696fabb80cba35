package analyzer

import (
	"fmt"
	"math"
)

// The capacity checks: recovery, load-amplification and wasted-work read
// the capacity bins the Analyzer keeps (loadState, judged once per Result:
// Analyzer.ldJ). Each is a range: the stub's capacity is exact, but the
// host delivers responses late (clients give up on attempts it served in
// time), and a host short of CPU paces the stub itself and breaks up
// retries that would have arrived together (schema rows).

type capacityCheck struct {
	checkBase
	judge func(a *Analyzer, c *checkCfg) CheckResult
}

func newRecovery(b checkBase) checker { return capacityCheck{b, (*Analyzer).recoveryRange} }
func newLoadAmp(b checkBase) checker  { return capacityCheck{b, (*Analyzer).loadAmpRange} }
func newWasted(b checkBase) checker   { return capacityCheck{b, (*Analyzer).wastedRange} }

func (ch capacityCheck) result() CheckResult {
	if ch.a.load == nil {
		return skip("the stub models no finite capacity (no meta.capacity)")
	}
	return ch.judge(ch.a, ch.cfg)
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
// the service time takes the low end to 0: the host may have cut the
// stub's capacity, which raises the figure.
func (a *Analyzer) starvedRange(fig, alt float64, until int64) (lo, hi float64, why string) {
	m := a.noise()
	lo, hi = fig, fig
	if !math.IsNaN(alt) {
		lo, hi = min(fig, alt), max(fig, alt)
	}
	if m.p90 > 0 && 2*m.p90 >= a.meta.Capacity.Service {
		// The host, not the scenario, may have set the stub's capacity:
		// less capacity only raises the figure, so the low end is 0.
		lo = 0
		why = fmt.Sprintf("the host's lateness p90 %s is half the stub's service time %s or more: the host may have set its capacity, which only raises the figure; ", fmtDur(m.p90), fmtDur(a.meta.Capacity.Service))
	}
	if until <= 0 {
		until = math.MaxInt64
	}
	ok, how := a.clientSpread(a.ampFrom(), until, m.p90)
	if !ok {
		hi = maxFigure
	}
	return lo, hi, why + how
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
		// No recovery can be told, so the window is unknown: hi is the
		// most any window from the trigger can read, if the retries show
		// their own spread (starvedRange).
		lo, hi, how = 0, maxFigure, "the server was not keeping up before the trigger: the host, not the scenario, overloaded it"
		if ok, spread := a.clientSpread(a.ampFrom(), j.ampUntil, m.p90); ok {
			hi = j.ampMost
			how += fmt.Sprintf("; whatever window a recovery would have closed, the mean over it is at most %s; %s", fmtAmp(j.ampMost), spread)
		} else {
			how += "; " + spread
		}
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
