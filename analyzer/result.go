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
