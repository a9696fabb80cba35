package analyzer

import (
	"fmt"
	"strings"

	"github.com/retrylab/retrylab/timeline"
)

// The noise model: what the host can do to a time, from what the run
// measured (timeline.End.Noise) or what a test injects (Options.Noise).
// It does three things, each with a direction:
//
//   - delay: an event happens later than the client meant, never earlier
//     (a gap between a response and the next arrival only lengthens).
//     Bounded per event by the lateness p99; most events meet the p50.
//   - batch: up to k arrivals that waited are stamped at one instant
//     (the only way the host brings arrivals together).
//   - starve: the host is short of CPU (PSI), so a stub of finite
//     capacity serves less than the scenario says.
//
// Every check's figure is a range [lo, hi]: the least and the most the
// client's own behaviour could have read under that noise. Each row of
// the check table (schema.go) declares, per kind, whether the host can
// raise the check's figure (then lo undoes it) or lower it (then hi
// undoes it); the check reads its figure with the host's part undone
// (rangeOf) and one rule decides (decide): FAIL when the whole range is
// past the threshold, PASS when it is all within it, else INCONCLUSIVE
// with the range. In virtual time and without a measurement the model is
// empty and the range is a point.
//
// A client's own word narrows it: a retry's wait claim (claims.go), where
// its arrival bears it out, says what the client meant, with the host's
// part out; instant-retry and waves read the claims they can check.

// starvePressure is the CPU pressure (PSI "some", % of the run) from
// which the host is starved: it, not the scenario, may have set a
// finite-capacity stub's pace.
const starvePressure = 25.0

// hostNoise is the model of one run's host.
type hostNoise struct {
	measured bool
	delay    int64   // per-event lateness bound: the p99, ns
	bulk     int64   // the lateness most events met: the p50, ns
	p90      int64   // ns
	reader   int64   // how late an exec program's result lines were read, p99, ns
	most     int64   // the largest lateness measured, ns
	batch    int     // most waiting arrivals stamped at one instant (1: none)
	pressure float64 // PSI "some", %
	source   string
}

// modelOf builds the model from a measurement (nil: empty).
func modelOf(n *timeline.Noise) hostNoise {
	if n == nil {
		return hostNoise{batch: 1}
	}
	m := hostNoise{measured: true, delay: max(n.P99, n.P90, n.P50), bulk: n.P50, p90: n.P90,
		batch: max(n.Batch, 1), pressure: n.CPUPressure, source: n.Source, most: n.Max, reader: n.ReaderP99}
	if m.p90 == 0 {
		m.p90 = n.P99 // a record written before the p90 was measured
	}
	// An exec program's result lines read late say how late its process
	// ran what it got: its timers met as much. The reader is a source.
	if n.ReaderP99 > 0 {
		m.p90, m.delay, m.most = max(m.p90, n.ReaderP90), max(m.delay, n.ReaderP99), max(m.most, n.ReaderP99)
		m.source += "+reader"
	}
	return m
}

// starvedFor reports whether the host was short of CPU for a stub whose
// mean service time is service (ns): pressure past starvePressure, or a
// lateness p90 of half the service time or more (the host, not the
// scenario, paced the stub).
func (m hostNoise) starvedFor(service int64) bool {
	return m.pressure >= starvePressure || (m.p90 > 0 && 2*m.p90 >= service)
}

// String describes the model for a reason: "host lateness p50 1ms, p99
// 12ms, batches of 5, CPU pressure 40% (sched+probe)".
func (m hostNoise) String() string {
	if !m.measured {
		return "no host noise measured"
	}
	parts := []string{fmt.Sprintf("host lateness p50 %s, p99 %s", fmtDur(m.bulk), fmtDur(m.delay))}
	if m.batch > 1 {
		parts = append(parts, fmt.Sprintf("batches of up to %d", m.batch))
	}
	if m.pressure > 0 {
		parts = append(parts, fmt.Sprintf("CPU pressure %.0f%%", m.pressure))
	}
	s := strings.Join(parts, ", ")
	if m.source != "" {
		s += " (" + m.source + ")"
	}
	return s
}

// Effect is how one kind of noise moves a check's figure as read.
type Effect int

const (
	// NoEffect: the host cannot move the figure this way.
	NoEffect Effect = iota
	// Raises: the host can make the figure read higher than the client's
	// own: the range's low end undoes it.
	Raises
	// Lowers: the host can make the figure read lower than the client's
	// own: the range's high end undoes it.
	Lowers
	// Both: the host can move the figure either way: both ends undo it.
	Both
)

func (e Effect) String() string {
	switch e {
	case Raises:
		return "raises"
	case Lowers:
		return "lowers"
	case Both:
		return "raises or lowers"
	}
	return "—"
}

// NoiseRow is how the host's noise moves one check's figure: per kind,
// its direction, and how the check reads its figure with the host's part
// undone.
type NoiseRow struct {
	Delay, Batch, Starve Effect
	// Undo says how the figure is read with the host's part undone.
	Undo string
}

// hostAct is what one end of a range attributes to the host.
type hostAct struct {
	delay  int64 // each event may be this late (ns); 0: none
	bulk   int64 // the lateness most events met (ns)
	batch  int   // arrivals stamped together (1: none)
	starve bool  // undo what a host short of CPU did (hostNoise.starvedFor says whether it was)
	n      hostNoise
}

// act is what the host is credited with at the end of a range that
// undoes the effects e: the kinds the row says move the figure that way.
func (m hostNoise) act(row NoiseRow, e Effect) hostAct {
	h := hostAct{batch: 1, n: m}
	on := func(x Effect) bool { return x == e || x == Both }
	if on(row.Delay) {
		h.delay, h.bulk = m.delay, m.bulk
	}
	if on(row.Batch) {
		h.batch = m.batch
	}
	h.starve = on(row.Starve)
	return h
}

// fmtFig prints a figure for a range: three significant digits, "∞".
func fmtFig(v float64) string {
	if v >= maxFigure {
		return "∞"
	}
	return fmt.Sprintf("%.3g", v)
}

// maxFigure stands for "unbounded" at a range's high end: the host may
// have hidden anything.
const maxFigure = 1e9

// overList keeps the events a check counts as past a bound (a budget,
// jitter's bound, a served phase): for each, how far past it was and
// how many waits of its own the host could have made late. Events within
// their bound are never kept, so the list holds offenders only, bounded
// by maxOvers (past it, they count whatever the noise).
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

// count is how many kept events stay past their bound once each of their
// waits is credited late ns to the host, and the event itself fixed ns,
// with their examples.
func (l *overList) count(late, fixed int64) (n int64, ex []Example) {
	n = l.overflow
	j := 0
	for i, o := range l.over {
		if o > late*int64(l.waits[i])+fixed {
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
