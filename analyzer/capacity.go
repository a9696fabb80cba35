package analyzer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// Defaults of the capacity checks; docs/design/capacity.md has the measurements
// behind each (TestCapacityCalibration in capsim_test.go prints them).
const (
	// defaultRecoveryShare: recovered when goodput is back to this share
	// (%) of the offered first-attempt load.
	defaultRecoveryShare = 90.0
	// defaultRecovery is how long recovery may take (s): twice the
	// slowest recovery of a well-behaved fleet in the calibration.
	defaultRecovery = 10.0
	// defaultHoldWindows: goodput must stay at the share for this many
	// rolling windows in a row (and at least minHold), so that one lucky
	// window does not count as recovery.
	defaultHoldWindows = 5
	minHold            = int64(5 * time.Second)
	// windowCount is how many first attempts the rolling window holds at
	// the run's mean offered load, when that takes longer than minWindow;
	// maxWindow caps it.
	windowCount = 200
	minWindow   = int64(time.Second)
	maxWindow   = int64(10 * time.Second)
	// baselineSpan: how long before the first trigger the baseline is
	// read (whether the server kept up at all before it).
	baselineSpan = int64(10 * time.Second)
	// defaultLoadAmp is the most attempts per offered first attempt the
	// server may see during and after the trigger.
	defaultLoadAmp = 1.5
	// defaultWasted is the most service time (%) spent on requests whose
	// client had gone.
	defaultWasted = 50.0
)

// capacityGrace is how long the state of a logical request outlives its
// outcome against a stub with finite capacity: an attempt the client left
// waiting is recorded when the stub is done with it, after the outcome,
// as late as a full queue takes to drain at the lowest share of the
// workers a phase runs, plus ten mean service times (an exponential
// service time is longer with probability e^-10). closeGrace at least,
// a minute at most.
func capacityGrace(meta *timeline.Meta) int64 {
	c := meta.Capacity
	share := 1.0
	for _, ph := range meta.Phases {
		if ph.Capacity > 0 && ph.Capacity < share {
			share = ph.Capacity
		}
	}
	workers := max(1, float64(c.Concurrency)*share)
	svc := float64(max(c.Service, 0))
	drain := float64(max(c.Queue, 0)) * svc / workers
	return int64(min(float64(time.Minute), max(float64(closeGrace), float64(closeGrace)+drain+10*svc)))
}

// A Span is an interval of the run, ns since its start; End 0: until the
// run ends.
type Span struct{ Start, End int64 }

// TriggerSpans are the stretches of the run in which a phase scales the
// stub's capacity below its full concurrency (0 < Phase.Capacity < 1):
// the triggers of an overload, consecutive trigger phases joined into one
// span, in order. nil without a capacity model or without such a phase.
func TriggerSpans(meta *timeline.Meta) []Span {
	if meta == nil || meta.Capacity == nil {
		return nil
	}
	var spans []Span
	for _, ph := range meta.Phases {
		if !(ph.Capacity > 0 && ph.Capacity < 1) {
			continue
		}
		if n := len(spans); n > 0 && spans[n-1].End == ph.Start && ph.Start != 0 {
			spans[n-1].End = ph.End
			continue
		}
		spans = append(spans, Span{ph.Start, ph.End})
	}
	return spans
}

// CapacityRate is the throughput, in requests per second, of a stub with
// capacity c while a phase runs it at share of its concurrency (0 or ≥ 1:
// full): Concurrency × share / mean service time. It is what the stub can
// serve when every worker is busy, the estimate the capacity plot draws;
// nil c or no service time is 0.
func CapacityRate(c *timeline.Capacity, share float64) float64 {
	if c == nil || c.Service <= 0 {
		return 0
	}
	if share <= 0 || share > 1 {
		share = 1
	}
	return float64(c.Concurrency) * share / (float64(c.Service) / 1e9)
}

// A LoadSeries is the capacity checks' view of a run (recovery,
// load-amplification, wasted-work), the facts the report's capacity plot
// draws: per bin of Width ns from time zero, the first attempts, all
// attempts and the capacity rejections that arrived in it, the successful
// responses delivered in it (goodput: a 2xx the client received, not
// abandoned), and the mean number of requests waiting for a worker during
// it (from each attempt's recorded queueing time, counted from its
// arrival). Window is the rolling window the checks read rates over (a
// multiple of Width); Recovery the recovery check's judgement.
type LoadSeries struct {
	Width                           int64
	First, Attempts, Good, Rejected []int64
	Queue                           []float64
	Window                          int64
	Triggers                        []Span
	Recovery                        Recovery
}

// Load returns the capacity checks' series and judgement of what was
// added so far, or nil when the timeline states no capacity model. The
// slices are copies, one entry per bin up to the last one used.
func (a *Analyzer) Load() *LoadSeries {
	l := a.load
	if l == nil {
		return nil
	}
	l.materialize()
	n := l.used
	s := &LoadSeries{Width: l.width, First: clone(l.first[:n]), Attempts: clone(l.attempts[:n]), Good: clone(l.good[:n]),
		Rejected: clone(l.rejected[:n]), Queue: make([]float64, n), Triggers: TriggerSpans(a.meta)}
	for i := range n {
		s.Queue[i] = l.qArea[i] / float64(l.width)
	}
	j := a.judgeLoad(false)
	s.Window, s.Recovery = j.window, j.rec
	return s
}

func clone[T any](s []T) []T { return append([]T(nil), s...) }

// judgeLoad reads the capacity checks' figures from the bins. With
// inTime, goodput counts the attempts served within the attempt timeout
// that the host delivered too late (loadState.inTime).
func (a *Analyzer) judgeLoad(inTime bool) loadJudgement {
	l := a.load
	j := loadJudgement{inTime: inTime}
	rc := a.cfgOf(CheckRecovery)
	j.rec.Share = rc.num("share")
	l.materialize()
	n := l.used
	width := l.width

	// The rolling window: long enough to hold windowCount first attempts
	// at the run's mean offered load, at least a second, at most ten.
	win := minWindow
	if l.firsts > 1 && l.lastFirst > l.firstAt {
		need := int64(float64(windowCount) * float64(l.lastFirst-l.firstAt) / float64(l.firsts-1))
		win = min(max(win, need), maxWindow)
	}
	if v, ok := rc.params["window"]; ok {
		win = int64(v.num * float64(time.Second))
	}
	j.w = max(1, int((win+width-1)/width))
	j.window = int64(j.w) * width
	hold := max(minHold, defaultHoldWindows*j.window)
	if v, ok := rc.params["hold"]; ok {
		hold = int64(v.num * float64(time.Second))
	}
	h := max(j.w, int((hold+width-1)/width))
	j.rec.Hold = int64(h) * width

	// Prefix sums of first attempts, goodput and attempts.
	pf, pg, pa, pr := make([]int64, n+1), make([]int64, n+1), make([]int64, n+1), make([]int64, n+1)
	for i := range n {
		pf[i+1] = pf[i] + l.first[i]
		pg[i+1] = pg[i] + l.good[i]
		if inTime {
			pg[i+1] += l.inTime[i]
		}
		pa[i+1] = pa[i] + l.attempts[i]
		pr[i+1] = pr[i] + l.rejected[i]
	}
	sum := func(p []int64, from, to int) int64 { return p[min(to, n)] - p[min(from, n)] }
	healthy := func(i int) bool {
		return float64(sum(pg, i, i+j.w)) >= j.rec.Share/100*float64(sum(pf, i, i+j.w))
	}
	ceilBin := func(t int64) int { return int((t + width - 1) / width) }

	spans := TriggerSpans(a.meta)
	if len(spans) == 0 {
		j.rec.Skip = "no phase scales the stub's capacity below its concurrency (no trigger)"
		j.ampSkip = j.rec.Skip
		return j
	}
	last := spans[len(spans)-1]
	j.rec.End = last.End
	j.rec.Threshold = a.recoveryThreshold(rc)

	// load-amplification: during every trigger span; after the last one
	// until the recovery (or the end of the offered load).
	endBin := int(l.lastFirst / width) // bins before it are whole for offered load
	spanAmp := func(from, to int) ampSpan {
		var s ampSpan
		if to <= from {
			return s
		}
		s.attempts, s.first = sum(pa, from, to), sum(pf, from, to)
		j.ampRejected += sum(pr, from, to)
		win := min(j.w, to-from)
		for i := from; i+win <= to; i++ {
			if f := sum(pf, i, i+win); f > 0 {
				s.peak = max(s.peak, float64(sum(pa, i, i+win))/float64(f))
			}
		}
		return s
	}
	for _, sp := range spans {
		to := n
		if sp.End > 0 {
			to = ceilBin(sp.End)
		}
		d := spanAmp(int(sp.Start/width), to)
		j.during.attempts += d.attempts
		j.during.first += d.first
		j.during.peak = max(j.during.peak, d.peak)
	}

	finishAmp := func(until int64) {
		if last.End > 0 && until > last.End {
			j.after = spanAmp(ceilBin(last.End), int(until/width))
		}
		j.ampUntil = until
		j.ampAttempts = j.during.attempts + j.after.attempts
		j.ampFirst = j.during.first + j.after.first
		at, f := j.during.attempts, j.during.first
		if f > 0 {
			j.ampMost = float64(at) / float64(f)
		}
		if last.End > 0 {
			for i := ceilBin(last.End); i < int(until/width); i++ {
				at, f = at+sum(pa, i, i+1), f+sum(pf, i, i+1)
				if f > 0 {
					j.ampMost = max(j.ampMost, float64(at)/float64(f))
				}
			}
		}
		if j.ampFirst == 0 {
			j.ampSkip = "no first attempt arrived during or after the trigger"
		}
	}

	switch {
	case last.End == 0:
		j.rec.Skip = "the last trigger lasts until the run ends: there is no after to judge"
		finishAmp(0)
		return j
	case l.firsts == 0 || l.lastFirst < last.End:
		j.rec.Skip = fmt.Sprintf("no first attempt arrived after the trigger ended at %s: no offered load to recover", fmtNS(last.End))
		finishAmp(0)
		return j
	}

	// Was the server keeping up before the first trigger at all?
	bT := int(spans[0].Start / width)
	bA := max(ceilBin(l.firstAt)+j.w, bT-int(baselineSpan/width))
	if bT-bA >= j.w {
		f, g := sum(pf, bA, bT), sum(pg, bA, bT)
		if f > 0 && float64(g) < j.rec.Share/100*float64(f) {
			// Whose overload: the scenario's, when the fleet asks for
			// more than the capacity at rest; or the host's, when it
			// delivered responses served within the attempt timeout
			// after their clients had gone, whose retries filled the
			// queue (docs/design/capacity.md).
			why := "the fleet asks for more than the capacity"
			var late int64
			for _, v := range l.inTime[:min(bT, n)] {
				late += v
			}
			if late > 0 {
				why = fmt.Sprintf("the fleet asks for more than the capacity, or the host tipped it: before the trigger %d successful attempts the stub served within the %s attempt timeout were delivered after their clients had gone", late, fmtDur(l.timeout))
			}
			j.rec.Skip = fmt.Sprintf("the server was not keeping up before the trigger: goodput %.0f%% of the offered load over %s–%s (%s; recovery from the trigger cannot be told from that)",
				100*float64(g)/float64(f), fmtNS(int64(bA)*width), fmtNS(int64(bT)*width), why)
			j.baselineOver = true
			finishAmp(int64(endBin) * width)
			return j
		}
	}

	// The first span of h bins from the trigger's end covered by healthy
	// windows.
	s0 := ceilBin(last.End)
	run := 0
	for i := s0; i+j.w <= endBin; i++ {
		if !healthy(i) {
			run = 0
			continue
		}
		run++
		if run == h-j.w+1 {
			start := i - (h - j.w)
			j.rec.Recovered = true
			j.rec.At = int64(start) * width
			j.rec.Time = time.Duration(max(0, j.rec.At-last.End))
			break
		}
	}
	j.rec.Observed = max(0, int64(endBin)*width-last.End)
	if j.rec.Recovered {
		finishAmp(j.rec.At)
		return j
	}
	finishAmp(int64(endBin) * width)
	if need := int64(j.rec.Threshold) + j.rec.Hold; j.rec.Observed < need {
		j.rec.Skip = fmt.Sprintf("the offered load ended %s after the trigger, before goodput was back; judging needs %s of it (the %s threshold plus the %s hold): lengthen the run",
			fmtDur(j.rec.Observed), fmtDur(need), fmtDur(int64(j.rec.Threshold)), fmtDur(j.rec.Hold))
		return j
	}
	j.rec.Metastable = true
	return j
}

// recoveryThreshold is how long recovery may take: the threshold given,
// else defaultRecovery (the schema's).
func (a *Analyzer) recoveryThreshold(c *checkCfg) time.Duration {
	return time.Duration(a.threshold(c) * float64(time.Second))
}

func (a *Analyzer) judgeRecovery(j *loadJudgement) CheckResult {
	if a.meta == nil || a.meta.Capacity == nil {
		return skip("the stub models no finite capacity (no meta.capacity)")
	}
	rec := &j.rec
	if rec.Skip != "" {
		return skip(rec.Skip)
	}
	thr := rec.Threshold.Seconds()
	why := func() string {
		return fmt.Sprintf("goodput at ≥ %s%% of the offered first-attempt load for %s, read over %s windows, after the trigger ended at %s",
			strconv.FormatFloat(rec.Share, 'f', -1, 64), fmtDur(rec.Hold), fmtDur(j.window), fmtNS(rec.End))
	}
	samples := a.load.firsts
	if rec.Recovered {
		r := CheckResult{Status: StatusPass, Figure: rec.Time.Seconds(), Threshold: thr, Samples: samples,
			Reason: fmt.Sprintf("recovered %s after the trigger: %s", fmtDur(int64(rec.Time)), why())}
		if r.Figure > thr {
			r.Status = StatusFail
			r.Reason = fmt.Sprintf("recovered only %s after the trigger, above %s: %s", fmtDur(int64(rec.Time)), fmtDur(int64(rec.Threshold)), why())
			r.Examples = []Example{{At: rec.At, Prev: rec.End, Detail: fmt.Sprintf("goodput back at ≥ %s%% of the offered load from %s, %s after the trigger ended at %s",
				strconv.FormatFloat(rec.Share, 'f', -1, 64), fmtNS(rec.At), fmtDur(int64(rec.Time)), fmtNS(rec.End))}}
		}
		return r
	}
	// Metastable: the figure is what was observed, a lower bound.
	return CheckResult{Status: StatusFail, Figure: float64(rec.Observed) / 1e9, Threshold: thr, Samples: samples,
		Reason: fmt.Sprintf("metastable: goodput never returned to ≥ %s%% of the offered first-attempt load in the %s of offered load after the trigger ended at %s (read over %s windows): the overload outlived its trigger",
			strconv.FormatFloat(rec.Share, 'f', -1, 64), fmtDur(rec.Observed), fmtNS(rec.End), fmtDur(j.window)),
		Examples: []Example{{At: rec.End + rec.Observed, Prev: rec.End, Detail: fmt.Sprintf("metastable: still below %s%% of the offered load %s after the trigger ended at %s, when the offered load ended",
			strconv.FormatFloat(rec.Share, 'f', -1, 64), fmtDur(rec.Observed), fmtNS(rec.End))}}}
}

func (a *Analyzer) judgeLoadAmp(c *checkCfg, j *loadJudgement) CheckResult {
	if a.meta == nil || a.meta.Capacity == nil {
		return skip("the stub models no finite capacity (no meta.capacity)")
	}
	if j.ampSkip != "" {
		return skip(j.ampSkip)
	}
	fig := float64(j.ampAttempts) / float64(j.ampFirst)
	var b strings.Builder
	fmt.Fprintf(&b, "%d attempts for %d first attempts", j.ampAttempts, j.ampFirst)
	if j.ampRejected > 0 {
		fmt.Fprintf(&b, " (%d rejected with the queue full)", j.ampRejected)
	}
	fmt.Fprintf(&b, "; during the trigger: mean %s, peak %s", fmtAmp(j.during.mean()), fmtAmp(j.during.peak))
	switch {
	case j.rec.Skip != "" && j.after.first == 0:
		b.WriteString("; after it: not judged (" + j.rec.Skip + ")")
	case j.after.first == 0 && j.rec.Recovered:
		b.WriteString("; after it: none (recovered at once)")
	case j.rec.Recovered:
		fmt.Fprintf(&b, "; after it, until the recovery at %s: mean %s, peak %s", fmtNS(j.rec.At), fmtAmp(j.after.mean()), fmtAmp(j.after.peak))
	default:
		fmt.Fprintf(&b, "; after it, until the offered load ended at %s (no recovery): mean %s, peak %s", fmtNS(j.ampUntil), fmtAmp(j.after.mean()), fmtAmp(j.after.peak))
	}
	fmt.Fprintf(&b, "; peaks over %s windows", fmtDur(j.window))
	r := verdict(c, fig, c.def.Threshold.Num, j.ampFirst, b.String())
	if r.Status == StatusFail {
		r.Examples = []Example{{At: TriggerSpans(a.meta)[0].Start, Detail: fmt.Sprintf("the server saw %.2f attempts per first attempt from the trigger until %s; the limit is %.2f",
			fig, recoveryWord(j), r.Threshold)}}
	}
	return r
}

func recoveryWord(j *loadJudgement) string {
	if j.rec.Recovered {
		return "the recovery at " + fmtNS(j.rec.At)
	}
	return "the offered load ended"
}

func fmtAmp(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return strconv.FormatFloat(x, 'f', 2, 64) + "×"
}

func (a *Analyzer) judgeWasted(c *checkCfg) CheckResult {
	if a.meta == nil || a.meta.Capacity == nil {
		return skip("the stub models no finite capacity (no meta.capacity)")
	}
	l := a.load
	if l.service == 0 {
		return skip("no attempt records a service time")
	}
	cancel := "served for nothing"
	if a.meta.Capacity.CancelOnDisconnect {
		cancel = "cancel_on_disconnect drops queued ones unserved"
	}
	r := verdict(c, pct(l.wasted, l.service), c.def.Threshold.Num, l.servedN,
		fmt.Sprintf("%s of %s service went to %d attempts whose client had gone (%d abandoned in all; %s)",
			fmtDur(l.wasted), fmtDur(l.service), l.wastedN, l.abandoned, cancel))
	if r.Status == StatusFail {
		r.Examples = []Example{{Detail: fmt.Sprintf("%.1f%% of the service time was spent on requests whose client had gone; the limit is %.1f%%", r.Figure, r.Threshold)}}
	}
	return r
}
