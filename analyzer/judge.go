package analyzer

import (
	"fmt"

	"github.com/retrylab/retrylab/timeline"
)

// What every check's judgement goes through: the host's noise for this
// timeline, the one rule (decide), the threshold in force, and the small
// helpers of a result.

// noise is the model the checks read: the injected one, else the
// measured one.
func (a *Analyzer) noise() hostNoise {
	if a.noiseIn != nil {
		return modelOf(a.noiseIn)
	}
	if a.meta != nil && a.meta.Virtual {
		return hostNoise{batch: 1} // its clock waits for every goroutine: no host noise
	}
	if a.fid.end != nil && a.fid.end.Noise != nil {
		return modelOf(a.fid.end.Noise)
	}
	// Unmeasured (a recording from before the measurement): the fleet's
	// own start lateness is the one source of the host's lateness.
	if l := &a.fid.lateness; l.count() > 0 && !(a.meta != nil && isExec(a.meta.Subject)) {
		if p99 := l.quantile(0.99); p99 > 0 {
			return modelOf(&timeline.Noise{Source: "fleet", P50: l.quantile(0.5), P90: l.quantile(0.9), P99: p99})
		}
	}
	return hostNoise{batch: 1}
}

// rangeOf is a check's figure as a range: read with the host's part
// undone on each side. read(hostAct{}) is the figure as recorded.
func (a *Analyzer) rangeOf(c *checkCfg, read func(hostAct) float64) (lo, hi float64) {
	m := a.noise()
	row := c.def.Noise
	lo = read(m.act(row, Raises))
	hi = read(m.act(row, Lowers))
	return min(lo, hi), max(lo, hi)
}

// decide is the one rule: a check's result from the range of its figure.
// FAIL when the whole range is past thr, PASS when the whole range is
// within it, INCONCLUSIVE otherwise, with the range in the reason.
func (a *Analyzer) decide(c *checkCfg, lo, hi, thr float64, samples int64, reason string) CheckResult {
	if c.thrSet {
		thr = c.threshold
	}
	r := CheckResult{Status: StatusPass, Figure: lo, Threshold: thr, Samples: samples, Reason: reason}
	if hi != lo {
		r.Range = []float64{lo, hi}
	}
	switch {
	case lo > thr:
		r.Status = StatusFail
		if hi != lo {
			r.Reason += fmt.Sprintf("; %s–%s against %s: FAIL whatever the host did (%s)", fmtFig(lo), fmtFig(hi), fmtFig(thr), a.noise())
		}
	case hi <= thr:
		if hi != lo {
			r.Reason += fmt.Sprintf("; %s–%s against %s: PASS whatever the host did (%s)", fmtFig(lo), fmtFig(hi), fmtFig(thr), a.noise())
		}
	default:
		r.Status = StatusInconclusive
		r.Figure = hi
		r.Reason += fmt.Sprintf("; %s–%s against %s: the host's noise leaves it open (%s)", fmtFig(lo), fmtFig(hi), fmtFig(thr), a.noise())
	}
	return r
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

// cfgOf is the resolved configuration of check id.
func (a *Analyzer) cfgOf(id string) *checkCfg {
	for _, c := range a.cfg {
		if c.def.ID == id {
			return c
		}
	}
	return nil
}

// crossCheck reports whether outcomes are checked against the stub's
// records of their keys: in a fleet run's timeline, which holds both (a
// `run --target` shard's holds no attempt: merge it with the stubs'
// recordings first).
func (a *Analyzer) crossCheck() bool {
	return a.meta != nil && a.meta.Recorder != "serve" && a.fig.Attempts > 0
}

// unbacked reports whether the end record says the recordings behind a
// merged timeline do not back all its outcomes (a stub's recording left
// out): the evidence is incomplete, the run is INCONCLUSIVE for it, and
// no outcome is judged lost for lack of it.
func (a *Analyzer) unbacked() bool { return a.fid.end != nil && a.fid.end.Unbacked > 0 }
