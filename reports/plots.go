package reports

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/retrylab/retrylab/timeline"
)

// Plot names: the base names of the files a report writes (NAME.png,
// NAME.svg) and the ids of the figures in report.html.
const (
	PlotAttempts   = "attempts"
	PlotRaster     = "raster"
	PlotRetryAfter = "retry-after"
	PlotBackoff    = "backoff"
	PlotCompletion = "completion"
	PlotCompare    = "compare"
)

// Display resolution of the binned plots.
const (
	attemptBins = 400   // bars of the attempts-over-time plot, at most
	rasterCols  = 600   // columns of the raster, at most
	rasterMarks = 20000 // marks of the raster, at most (keeps its SVG ~1 MB)
)

// A Plot is one figure of a report.
type Plot struct {
	Name    string // one of the Plot* names
	Title   string
	Caption string // how to read it
	// PNG and SVG are the file names, relative to the report's directory;
	// empty when the plot was not drawn.
	PNG, SVG string
	// Note says why the plot is missing, or what it leaves out (sampling).
	Note string
}

// drawn is a plot ready to be saved, or the reason it is missing.
type drawn struct {
	Plot
	p    interface{ Draw(draw.Canvas) }
	w, h vg.Length
}

func seconds(ns float64) float64 { return ns / 1e9 }

// plots builds every per-run plot from the collected data; the quota plot
// only when the meta lists the published limits, the capacity plot only
// when it states a capacity model.
func (c *Collector) plots() []drawn {
	ds := []drawn{c.plotAttempts()}
	if c.meta.Capacity != nil {
		ds = append(ds, c.plotCapacity())
	}
	if c.quota != nil {
		ds = append(ds, c.plotQuota())
	}
	return append(ds, c.plotRaster(), c.plotRetryAfter(), c.plotBackoff(), c.plotCompletion())
}

// phaseBands lays the scenario's phases out on the time axis, in unit u;
// the last phase (End 0) lasts until end (ns).
func (c *Collector) phaseBands(end int64, u durUnit) *bands {
	if len(c.meta.Phases) == 0 {
		return nil
	}
	b := &bands{}
	b.style.Font.Typeface = "Liberation"
	b.style.Font.Variant = "Sans"
	b.style.Font.Size = 9
	b.style.Color = colorRef
	b.style.XAlign = draw.XLeft
	b.style.YAlign = draw.YTop
	b.style.Handler = plot.DefaultTextHandler
	for _, ph := range c.meta.Phases {
		to := ph.End
		if to <= 0 {
			to = max(end, ph.Start)
		}
		b.spans = append(b.spans, band{from: u.of(float64(ph.Start)), to: u.of(float64(to)), label: ph.Name})
	}
	return b
}

// Plot 1: attempts per second over time, stacked by class, over the phases.
func (c *Collector) plotAttempts() drawn {
	d := drawn{Plot: Plot{
		Name:    PlotAttempts,
		Title:   "Attempts over time",
		Caption: "Attempts per second the server saw, stacked by response, averaged over bins of the width the y axis states; the scenario's phases are shaded. Retry waves show as spikes.",
	}, w: plotWidth, h: plotHeight}
	if c.stats.Attempts == 0 {
		d.Note = "The timeline has no attempts."
		return d
	}
	used, width := c.bins.used, c.bins.width
	var counts [numClasses][]uint64
	for cl := range counts {
		counts[cl] = slices.Clone(c.counts[cl])
	}
	for used > attemptBins {
		for _, s := range counts {
			foldSum(s)
		}
		width *= 2
		used = (used + 1) / 2
	}
	sec := seconds(float64(width))
	end := int64(used) * width
	tu := unitFor(float64(end))
	binW := tu.of(float64(width))
	p := newPlot(d.Title, "time since start ("+tu.name+")", "attempts per second ("+binWidthText(width)+" bins)")
	tidyAxes(p)
	if b := c.phaseBands(end, tu); b != nil {
		p.Add(b)
	}
	cum := make([]float64, used)
	peak := 0.0
	for cl := range numClasses {
		var total uint64
		for _, n := range counts[cl][:used] {
			total += n
		}
		if total == 0 {
			continue
		}
		lower := slices.Clone(cum)
		ring := make(plotter.XYs, 0, 4*used)
		for i := range used {
			cum[i] += float64(counts[cl][i]) / sec
			peak = max(peak, cum[i])
			ring = append(ring, plotter.XY{X: float64(i) * binW, Y: cum[i]}, plotter.XY{X: float64(i+1) * binW, Y: cum[i]})
		}
		for i := used - 1; i >= 0; i-- {
			ring = append(ring, plotter.XY{X: float64(i+1) * binW, Y: lower[i]}, plotter.XY{X: float64(i) * binW, Y: lower[i]})
		}
		p.Add(&plotter.Polygon{XYs: []plotter.XYs{ring}, Color: classColors[cl]})
		p.Legend.Add(fmt.Sprintf("%s (%s)", c.className(cl), fmtCount(total)), swatch{classColors[cl]})
	}
	p.X.Min, p.Y.Min = 0, 0
	p.X.Max = padMax(0, float64(used)*binW)
	p.Y.Max = peak * 1.15 // room for the phase labels above the highest bar
	d.p = legendOutside(p)
	return d
}

// binWidthText prints a bin width (ns) exactly, as the bars are wide: 50ms,
// 400ms, 1.024s (a width doubled from a round one is not rounded back).
func binWidthText(ns int64) string { return time.Duration(ns).String() }

// rasterPriority orders the classes when one raster cell holds several:
// the most alarming wins.
var rasterPriority = [...]int{classFault, class503, classOther, class429, class2xx}

// rasterRun is a raster mark: columns [from, to) of a row, one class.
type rasterRun struct{ row, from, to, class int }

// rasterRuns turns the raster's cells (a class bit set per row and column;
// used columns of width ns) into marks, merging neighbouring cells of the
// same class, and folds columns until there are at most rasterCols of them
// and at most rasterMarks marks. It folds cells in place and returns the
// marks with the final column count and width.
func rasterRuns(cells [][]uint8, used int, width int64) ([]rasterRun, int, int64) {
	var runs []rasterRun
	for {
		for used > rasterCols {
			for _, s := range cells {
				foldOr(s)
			}
			width *= 2
			used = (used + 1) / 2
		}
		runs = runs[:0]
		for ri, row := range cells {
			prev := -1
			for col := range used {
				cl := -1
				for _, k := range rasterPriority {
					if row[col]&(1<<k) != 0 {
						cl = k
						break
					}
				}
				if cl >= 0 && cl == prev {
					runs[len(runs)-1].to = col + 1
				} else if cl >= 0 {
					runs = append(runs, rasterRun{row: ri, from: col, to: col + 1, class: cl})
				}
				prev = cl
			}
		}
		if len(runs) <= rasterMarks || used <= 1 {
			return runs, used, width
		}
		for _, s := range cells {
			foldOr(s)
		}
		width *= 2
		used = (used + 1) / 2
	}
}

// Plot 2: one row per sampled client, one mark per attempt (per cell).
func (c *Collector) plotRaster() drawn {
	d := drawn{Plot: Plot{
		Name:    PlotRaster,
		Title:   "Client raster",
		Caption: "One row per client, one mark per attempt, coloured by response; the scenario's phases are shaded. Lockstep retries show as vertical stripes; jitter as scatter.",
	}, w: plotWidth, h: 5 * vg.Inch}
	rows := c.sortedRows()
	if len(rows) == 0 {
		d.Note = "The timeline has no attempts."
		return d
	}
	used, width := c.bins.used, c.bins.width
	cells := make([][]uint8, len(rows))
	for i, r := range rows {
		cells[i] = slices.Clone(r.cells)
	}
	runs, used, width := rasterRuns(cells, used, width)
	end := int64(used) * width
	tu := unitFor(float64(end))
	binW := tu.of(float64(width))
	n := len(rows)
	ys, halves, numeric := rasterRowsY(rows, c.stride)
	var rings [numClasses][]plotter.XYs
	for _, r := range runs {
		y, h := ys[r.row], halves[r.row]
		x0, x1 := float64(r.from)*binW, float64(r.to)*binW
		rings[r.class] = append(rings[r.class], plotter.XYs{{X: x0, Y: y - h}, {X: x1, Y: y - h}, {X: x1, Y: y + h}, {X: x0, Y: y + h}})
	}
	ylabel := "client"
	switch {
	case c.stride > 0:
		ylabel = fmt.Sprintf("client (every %d%s of %s)", c.stride, ordinalSuffix(c.stride), fmtCount(c.meta.Fleet.Clients))
	case len(rows) >= c.opts.MaxClients:
		ylabel = "client (a sample of " + fmtCount(len(rows)) + ")"
	}
	p := newPlot(d.Title, "time since start ("+tu.name+")", ylabel)
	tidyAxes(p)
	if b := c.phaseBands(end, tu); b != nil {
		p.Add(b)
	}
	for _, cl := range []int{class2xx, class429, class503, classOther, classFault} {
		if len(rings[cl]) == 0 {
			continue
		}
		p.Add(&plotter.Polygon{XYs: rings[cl], Color: classColors[cl]})
		p.Legend.Add(c.className(cl), swatch{classColors[cl]})
	}
	top, bottom := ys[0]+halves[0]/0.4*0.5, ys[n-1]-halves[n-1]/0.4*0.5
	if numeric {
		// Client numbers on the axis, the first client on top: round
		// numbers of clients, whichever clients the sample kept.
		p.Y.Tick.Marker = niceTicks{neg: true, minStep: 1}
	} else {
		var ticks []plot.Tick
		step := max(1, (n+7)/8)
		for i := 0; i < n; i += step {
			ticks = append(ticks, plot.Tick{Value: ys[i], Label: rows[i].client})
		}
		p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	}
	p.X.Min = 0
	p.X.Max = padMax(0, float64(used)*binW)
	p.Y.Min, p.Y.Max = bottom, top+(top-bottom)*0.07 // headroom for the phase labels
	if c.stride > 0 || len(rows) >= c.opts.MaxClients {
		d.Note = fmtCount(n) + " clients shown."
	}
	d.p = legendOutside(p)
	return d
}

// rasterRowsY places the raster's rows (sorted by client) on the y axis,
// first client on top: at −id when every client id is a number, so the
// axis counts clients, else at their index. It returns each row's centre
// and half height.
func rasterRowsY(rows []*rasterRow, stride int) (ys, halves []float64, numeric bool) {
	n := len(rows)
	ys, halves = make([]float64, n), make([]float64, n)
	ids := make([]float64, n)
	numeric = true
	for i, r := range rows {
		id, err := strconv.Atoi(r.client)
		if err != nil || id < 0 {
			numeric = false
			break
		}
		ids[i] = float64(id)
	}
	if !numeric {
		for i := range rows {
			ys[i], halves[i] = float64(n-1-i), 0.4
		}
		return ys, halves, false
	}
	unit := 1.0 // the spacing of the sampled ids
	switch {
	case stride > 0:
		unit = float64(stride)
	case n > 1:
		unit = max(1, (ids[n-1]-ids[0])/float64(n-1))
	}
	for i := range rows {
		ys[i] = -ids[i]
		gap := unit
		if i > 0 {
			gap = min(gap, ids[i]-ids[i-1])
		}
		if i+1 < n {
			gap = min(gap, ids[i+1]-ids[i])
		}
		halves[i] = 0.4 * max(gap, 1)
	}
	return ys, halves, true
}

func ordinalSuffix(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// Plot 3: the wait asked for by Retry-After against the wait taken.
func (c *Collector) plotRetryAfter() drawn {
	d := drawn{Plot: Plot{
		Name:  PlotRetryAfter,
		Title: "Retry-After compliance",
		Caption: "Each retry that followed a response with a usable Retry-After: the wait the server asked for (not_before − response) against the wait the client took (next arrival − response). " +
			"Points on or above y = x honoured it; early retries are red.",
	}, w: plotWidth, h: plotHeight}
	s := c.stats
	if s.RetryAfterRetries == 0 {
		d.Note = "No retry followed a response with a usable Retry-After."
		return d
	}
	top := 0.0
	for _, ps := range [][]raPoint{c.raOnTime.items, c.raEarly.items} {
		for _, pt := range ps {
			top = max(top, float64(pt.asked), float64(pt.taken))
		}
	}
	if top == 0 {
		top = 1e9
	}
	u := unitFor(top)
	toXY := func(ps []raPoint) plotter.XYs {
		xys := make(plotter.XYs, len(ps))
		for i, pt := range ps {
			xys[i] = plotter.XY{X: u.of(float64(max(pt.asked, 0))), Y: u.of(float64(max(pt.taken, 0)))}
		}
		return xys
	}
	onTime, early := toXY(c.raOnTime.items), toXY(c.raEarly.items)
	p := newPlot(d.Title, "wait asked by Retry-After ("+u.name+")", "wait taken before the retry ("+u.name+")")
	tidyAxes(p)
	end := padMax(0, u.of(top))
	diag := &segments{segs: [][2]plotter.XY{{{X: 0, Y: 0}, {X: end, Y: end}}}, style: draw.LineStyle{Color: colorRef, Width: 1, Dashes: []vg.Length{4, 3}}}
	p.Add(diag)
	p.Legend.Add("y = x: waited as asked", diag)
	ok := &dots{xys: onTime, color: colorOK, size: 1.6}
	p.Add(ok)
	p.Legend.Add("on time ("+fmtCount(s.RetryAfterRetries-s.EarlyRetries)+")", ok)
	if len(early) > 0 {
		bad := &dots{xys: early, color: colorWarn, size: 2.2, diam: true}
		p.Add(bad)
		p.Legend.Add("early by > "+fmtDur(c.opts.Tolerance)+" ("+fmtCount(s.EarlyRetries)+")", bad)
	}
	// The same range on both axes, so y = x is the diagonal.
	p.X.Min, p.Y.Min = 0, 0
	p.X.Max, p.Y.Max = end, end
	if int64(len(onTime)+len(early)) < s.RetryAfterRetries {
		d.Note = fmt.Sprintf("A sample of %s of %s retries is drawn (every early one up to %s).", fmtCount(len(onTime)+len(early)), fmtCount(s.RetryAfterRetries), fmtCount(raEarlySize))
	}
	d.p = legendOutside(p)
	return d
}

// Plot 4: the client's own delays by retry number, with the policy bound.
func (c *Collector) plotBackoff() drawn {
	d := drawn{Plot: Plot{
		Name:  PlotBackoff,
		Title: "Backoff delays by retry number",
		Caption: "The client's own delays: for each retry after a response with no usable Retry-After, the time from that response to the retry. " +
			"The red steps are the stated policy's bound min(cap, base·2^(n−1)); delays beyond it are red.",
	}, w: plotWidth, h: plotHeight}
	groups := 0
	for i, r := range c.delays {
		if len(r.items) > 0 {
			groups = i + 1
		}
	}
	if groups == 0 {
		d.Note = "No retry was paced by the client's own backoff (every retry followed a usable Retry-After, or there were no retries)."
		return d
	}
	top := 0.0
	for g := range groups {
		for _, v := range c.delays[g].items {
			top = max(top, float64(v))
		}
		if b, ok := c.bound(g + 1); ok {
			top = max(top, b)
		}
	}
	if top <= 0 {
		top = 1e9
	}
	u := unitFor(top)
	var in, out plotter.XYs
	var medians, bounds [][2]plotter.XY
	for g := range groups {
		n := g + 1
		b, hasBound := c.bound(n)
		items := c.delays[g].items
		for i, v := range items {
			off := (math.Mod(float64(i)*0.6180339887, 1) - 0.5) * 0.6
			xy := plotter.XY{X: float64(n) + off, Y: u.of(float64(max(v, 0)))}
			if hasBound && float64(v) > b+float64(c.opts.BoundTolerance) {
				out = append(out, xy)
			} else {
				in = append(in, xy)
			}
		}
		if len(items) > 0 {
			sorted := slices.Clone(items)
			slices.Sort(sorted)
			m := u.of(float64(sorted[len(sorted)/2]))
			medians = append(medians, [2]plotter.XY{{X: float64(n) - 0.38, Y: m}, {X: float64(n) + 0.38, Y: m}})
		}
		if hasBound {
			bounds = append(bounds, [2]plotter.XY{{X: float64(n) - 0.45, Y: u.of(b)}, {X: float64(n) + 0.45, Y: u.of(b)}})
		}
	}
	p := newPlot(d.Title, "retry number n (1 = the first retry)", "delay before the retry ("+u.name+")")
	tidyAxes(p)
	pin := &dots{xys: in, color: colorOK, size: 1.4}
	p.Add(pin)
	p.Legend.Add("delay (sampled)", pin)
	if len(out) > 0 {
		pout := &dots{xys: out, color: colorWarn, size: 2, diam: true}
		p.Add(pout)
		p.Legend.Add("beyond the bound ("+fmtCount(c.stats.BeyondBound)+")", pout)
	}
	med := &segments{segs: medians, style: draw.LineStyle{Color: rgb(0, 0, 0), Width: 2}}
	p.Add(med)
	p.Legend.Add("median", med)
	if len(bounds) > 0 {
		bs := &segments{segs: bounds, style: draw.LineStyle{Color: colorWarn, Width: 1.2, Dashes: []vg.Length{4, 2}}}
		p.Add(bs)
		pol := c.meta.Policy
		label := "bound: base " + fmtDur(time.Duration(pol.Base))
		switch {
		case pol.Jitter == "decorrelated":
			label = "bound: cap " + fmtDur(time.Duration(pol.Cap))
		case pol.Cap > 0:
			label += ", cap " + fmtDur(time.Duration(pol.Cap))
		}
		p.Legend.Add(label, bs)
	} else {
		d.Note = "The subject states no backoff policy, so no bound is drawn."
	}
	var ticks []plot.Tick
	for n := 1; n <= groups; n++ {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = 0.4, float64(groups)+0.6
	p.Y.Min, p.Y.Max = 0, padMax(0, u.of(top))
	if c.delayBeyondGroups > 0 {
		d.Note = joinNote(d.Note, fmt.Sprintf("%s delays of retries after the %dth are not drawn.", fmtCount(c.delayBeyondGroups), delayGroups))
	}
	d.p = legendOutside(p)
	return d
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

// resultOrder is the order of the completion curves.
var resultOrder = []string{
	timeline.ResultOK, timeline.ResultGaveUp, timeline.ResultBudget, timeline.ResultNonRetryable,
	timeline.ResultError, timeline.ResultHung, timeline.ResultCanceled,
}

// A completionCurve is one result's cumulative share of all logical
// requests against duration (x in the plot's unit, y in % of all logical
// requests): it rises to the result's share of all outcomes, not to 100.
type completionCurve struct {
	result string
	n      uint64
	xys    plotter.XYs
}

// completionCurves returns the curves of the completion plot in the unit
// u, in result order.
func (c *Collector) completionCurves(u durUnit) []completionCurve {
	results := slices.Clone(resultOrder)
	for r := range c.hists {
		if !slices.Contains(results, r) {
			results = append(results, r)
		}
	}
	slices.Sort(results[len(resultOrder):])
	total := float64(c.all.n)
	var curves []completionCurve
	for _, r := range results {
		h := c.hists[r]
		if h == nil || h.n == 0 {
			continue
		}
		xs, ys := h.cdf()
		share := 100 * float64(h.n) / total
		xys := make(plotter.XYs, 0, len(xs)+1)
		xys = append(xys, plotter.XY{X: 0, Y: 0})
		for i := range xs {
			xys = append(xys, plotter.XY{X: u.of(xs[i]), Y: ys[i] * share})
		}
		// The plateau goes on to the last completion of any result.
		if last := u.of(float64(c.all.max)); last > xys[len(xys)-1].X {
			xys = append(xys, plotter.XY{X: last, Y: share})
		}
		curves = append(curves, completionCurve{result: r, n: h.n, xys: xys})
	}
	return curves
}

// Plot 5: the completion of logical requests over time, by result.
func (c *Collector) plotCompletion() drawn {
	d := drawn{Plot: Plot{
		Name:  PlotCompletion,
		Title: "Completion of logical requests",
		Caption: "For each result, the share of all logical requests that had ended with it by a given time after the caller started them; " +
			"each curve rises to that result's share, and the curves' end values add up to 100%. " +
			"Failures should end by the retry budget (dashed line).",
	}, w: plotWidth, h: plotHeight}
	if c.stats.Outcomes == 0 {
		d.Note = "The timeline has no outcome records"
		if c.meta.Recorder == "serve" {
			d.Note += " (a serve recording: the clients ran outside the harness)"
		}
		d.Note += ", so when and how logical requests ended is unknown."
		return d
	}
	top := float64(c.all.max)
	var budget float64
	if pol := c.meta.Policy; pol != nil && pol.Budget > 0 {
		budget = float64(pol.Budget)
		top = max(top, budget)
	}
	if top <= 0 {
		top = 1e9
	}
	u := unitFor(top)
	p := newPlot(d.Title, "duration of the logical request ("+u.name+")", fmt.Sprintf("%% of all %s logical requests", fmtCount(c.all.n)))
	tidyAxes(p)
	for _, cv := range c.completionCurves(u) {
		l, err := plotter.NewLine(cv.xys)
		if err != nil {
			continue
		}
		l.StepStyle = plotter.PostStep
		clr, ok := resultColors[cv.result]
		if !ok {
			clr = colorSkip
		}
		l.LineStyle = draw.LineStyle{Color: clr, Width: 1.6}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (%s, %s)", cv.result, fmtCount(cv.n), fmtShare(float64(cv.n)/float64(c.all.n))), l)
	}
	if budget > 0 {
		v := &vline{x: u.of(budget), style: draw.LineStyle{Color: colorWarn, Width: 1.2, Dashes: []vg.Length{5, 3}}}
		p.Add(v)
		p.Legend.Add("budget "+fmtDur(time.Duration(budget)), v)
	} else {
		d.Note = "The subject states no retry budget, so none is drawn."
	}
	p.X.Min, p.X.Max = 0, padMax(0, u.of(top))
	p.Y.Min, p.Y.Max = 0, 100
	d.p = legendOutside(p)
	return d
}
