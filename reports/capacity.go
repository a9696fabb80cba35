package reports

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/retrylab/retrylab/analyzer"
)

// PlotCapacity is the capacity plot: offered load, attempts, goodput and
// the server's capacity over time, the queue under them; drawn only when
// the timeline's meta states a capacity model (timeline.Meta.Capacity).
const PlotCapacity = "capacity"

// capacityPoints is the most points each line of the capacity plot has;
// capacityBars the most bars of its queue.
const (
	capacityPoints = 800
	capacityBars   = 400
)

// Colours of the capacity plot.
var (
	colorOffered  = rgb(0x1f, 0x77, 0xb4) // blue: what the users asked for
	colorAttempts = rgb(0xff, 0x7f, 0x0e) // orange: what the server got
	colorGoodput  = rgb(0x2c, 0xa0, 0x2c) // green: what the users got (lighter, as an area)
	colorQueue    = rgb(0x94, 0x67, 0xbd) // purple
	colorTrigger  = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0x22}
)

// Plot 7: the capacity checks' facts over time. Everything drawn comes
// from the analyzer (Analyzer.Load): its bins, its rolling window, its
// recovery instant; the report recomputes none of it.
func (c *Collector) plotCapacity() drawn {
	d := drawn{Plot: Plot{
		Name:  PlotCapacity,
		Title: "Load and capacity",
		Caption: "Top: first attempts per second (the offered load), all attempts per second (what the server was asked to do), and goodput " +
			"(2xx responses the client received, counted at their arrival), averaged over the recovery check's window; the dashed line is the " +
			"server's capacity, workers × the phase's share ÷ the mean service time. The trigger phases are shaded; the vertical line is the " +
			"instant the recovery check found goodput back at its share of the offered load. Bottom: requests waiting for a worker, on " +
			"average, from each attempt's recorded queueing time; the dashed line is the queue's limit.",
	}, w: plotWidth, h: 5 * vg.Inch}
	l := c.an.Load()
	if l == nil || len(l.First) == 0 {
		d.Note = "The timeline has no attempts."
		return d
	}
	capa := c.meta.Capacity
	n := len(l.First)
	width := l.Width
	end := int64(n) * width
	tu := unitFor(float64(end))
	x := func(ns int64) float64 { return tu.of(float64(ns)) }

	// The rates, averaged over the window centred on each bin.
	w := max(1, int(l.Window/width))
	step := max(1, (n+capacityPoints-1)/capacityPoints)
	rate := func(counts []int64) plotter.XYs {
		pre := make([]int64, n+1)
		for i, v := range counts {
			pre[i+1] = pre[i] + v
		}
		var xys plotter.XYs
		for i := 0; i < n; i += step {
			lo, hi := max(0, i-w/2), min(n, i-w/2+w)
			sec := seconds(float64(int64(hi-lo) * width))
			xys = append(xys, plotter.XY{X: x(int64(i)*width + width/2), Y: float64(pre[hi]-pre[lo]) / sec})
		}
		return xys
	}
	offered, attempts, good := rate(l.First), rate(l.Attempts), rate(l.Good)
	peak := 0.0
	for _, s := range []plotter.XYs{offered, attempts, good} {
		for _, p := range s {
			peak = max(peak, p.Y)
		}
	}
	// The capacity, phase by phase.
	var capXY plotter.XYs
	full := analyzer.CapacityRate(capa, 1)
	if len(c.meta.Phases) == 0 {
		capXY = plotter.XYs{{X: 0, Y: full}, {X: x(end), Y: full}}
	}
	for _, ph := range c.meta.Phases {
		to := ph.End
		if to <= 0 || to > end {
			to = max(end, ph.Start)
		}
		if ph.Start >= end {
			continue
		}
		r := analyzer.CapacityRate(capa, ph.Capacity)
		capXY = append(capXY, plotter.XY{X: x(ph.Start), Y: r}, plotter.XY{X: x(to), Y: r})
	}

	top := newPlot(d.Title, "", "requests per second ("+binWidthText(int64(w)*width)+" window)")
	tidyAxes(top)
	top.X.Tick.Marker = blankLabels{niceTicks{}}
	rec := l.Recovery
	trig := c.triggerShades(l.Triggers, end, tu)
	top.Add(trig)
	var entries []func() // the legend, in reading order
	addLine := func(p *plot.Plot, xys plotter.XYs, clr color.Color, width vg.Length, dashes []vg.Length, label string) func() {
		ln, err := plotter.NewLine(xys)
		if err != nil {
			return func() {}
		}
		ln.LineStyle = draw.LineStyle{Color: clr, Width: width, Dashes: dashes}
		p.Add(ln)
		return func() { p.Legend.Add(label, ln) }
	}
	var firsts, total, goods int64
	for i := range n {
		firsts, total, goods = firsts+l.First[i], total+l.Attempts[i], goods+l.Good[i]
	}
	// Goodput is an area under the lines, so the offered load shows above
	// it where the two agree.
	if len(good) > 0 {
		ring := append(plotter.XYs{{X: good[0].X, Y: 0}}, good...)
		ring = append(ring, plotter.XY{X: good[len(good)-1].X, Y: 0})
		top.Add(&plotter.Polygon{XYs: []plotter.XYs{ring}, Color: lighter(colorGoodput)})
	}
	attLegend := addLine(top, attempts, colorAttempts, 1.4, nil, fmt.Sprintf("all attempts (%s)", fmtCount(total)))
	entries = append(entries,
		addLine(top, offered, colorOffered, 1.4, nil, fmt.Sprintf("offered: first attempts (%s)", fmtCount(firsts))),
		attLegend,
		func() {
			top.Legend.Add(fmt.Sprintf("goodput (%s)", fmtCount(goods)), swatch{lighter(colorGoodput)})
		})
	if full > 0 {
		entries = append(entries, addLine(top, capXY, colorRef, 1.2, []vg.Length{5, 3}, fmt.Sprintf("capacity: %d workers ÷ %s", capa.Concurrency, fmtDur(time.Duration(capa.Service)))))
		peak = max(peak, full)
	}
	for _, e := range entries {
		e()
	}
	if len(l.Triggers) > 0 {
		top.Legend.Add("trigger (capacity scaled down)", swatch{colorTrigger})
	}
	note := ""
	switch {
	case rec.Recovered:
		v := &vline{x: x(rec.At), style: draw.LineStyle{Color: colorPass, Width: 1.6, Dashes: []vg.Length{2, 2}}}
		top.Add(v)
		top.Legend.Add(fmt.Sprintf("recovered %s after the trigger", fmtDur(rec.Time)), v)
	case rec.Metastable:
		top.Legend.Add(fmt.Sprintf("never recovered in %s: metastable", fmtDur(time.Duration(rec.Observed))), swatch{colorWarn})
	case rec.Skip != "":
		note = "Recovery not judged: " + rec.Skip + "."
	}
	top.X.Min, top.Y.Min = 0, 0
	top.X.Max = padMax(0, x(end))
	top.Y.Max = peak * 1.15 // room for the trigger labels

	// The queue.
	qs := append([]float64(nil), l.Queue...)
	qw, qn := width, n
	for qn > capacityBars {
		h := len(qs) / 2
		for i := 0; i < h; i++ {
			qs[i] = (qs[2*i] + qs[2*i+1]) / 2
		}
		if len(qs)%2 == 1 {
			qs[h] = qs[len(qs)-1] / 2
			h++
		}
		qs = qs[:h]
		qw, qn = qw*2, h
	}
	bottom := newPlot("", "time since start ("+tu.name+")", "waiting")
	tidyAxes(bottom)
	bshades := c.triggerShades(l.Triggers, end, tu)
	for i := range bshades.spans {
		bshades.spans[i].label = "" // the upper panel names them
	}
	bottom.Add(bshades)
	qpeak := 0.0
	ring := make(plotter.XYs, 0, 2*qn+2)
	for i, q := range qs {
		ring = append(ring, plotter.XY{X: x(int64(i) * qw), Y: q}, plotter.XY{X: x(int64(i+1) * qw), Y: q})
		qpeak = max(qpeak, q)
	}
	ring = append(ring, plotter.XY{X: x(int64(qn) * qw), Y: 0}, plotter.XY{X: 0, Y: 0})
	bottom.Add(&plotter.Polygon{XYs: []plotter.XYs{ring}, Color: colorQueue})
	bottom.Legend.Add(fmt.Sprintf("queue (mean, peak %s)", fmtNum(math.Round(qpeak))), swatch{colorQueue})
	if capa.Queue > 0 {
		h := &hline{y: float64(capa.Queue), style: draw.LineStyle{Color: colorRef, Width: 1.2, Dashes: []vg.Length{5, 3}}}
		bottom.Add(h)
		bottom.Legend.Add("queue limit "+strconv.Itoa(capa.Queue), limitKey{fill: color.Transparent, line: &h.style})
		qpeak = max(qpeak, float64(capa.Queue))
	}
	if rec.Recovered {
		bottom.Add(&vline{x: x(rec.At), style: draw.LineStyle{Color: colorPass, Width: 1.6, Dashes: []vg.Length{2, 2}}})
	}
	bottom.X.Min, bottom.Y.Min = 0, 0
	bottom.X.Max = top.X.Max
	bottom.Y.Max = max(1, qpeak*1.15)
	d.Note = note
	d.p = newStacked(top, bottom, 0.66)
	return d
}

// triggerShades shades the trigger spans, labelled with their share of
// the capacity.
func (c *Collector) triggerShades(spans []analyzer.Span, end int64, u durUnit) *shades {
	s := &shades{fill: colorTrigger}
	s.style.Font.Typeface = "Liberation"
	s.style.Font.Variant = "Sans"
	s.style.Font.Size = 9
	s.style.Color = colorRef
	s.style.XAlign = draw.XLeft
	s.style.YAlign = draw.YTop
	s.style.Handler = plot.DefaultTextHandler
	for _, sp := range spans {
		to := sp.End
		if to <= 0 {
			to = max(end, sp.Start)
		}
		label := ""
		for _, ph := range c.meta.Phases {
			if ph.Start == sp.Start && ph.Capacity > 0 && ph.Capacity < 1 {
				label = fmt.Sprintf("%s: %s%%", ph.Name, strconv.FormatFloat(100*ph.Capacity, 'f', -1, 64))
			}
		}
		s.spans = append(s.spans, band{from: u.of(float64(sp.Start)), to: u.of(float64(to)), label: label})
	}
	return s
}

// shades fills spans of the x axis with one colour and labels each at the
// top of the data area.
type shades struct {
	spans []band
	fill  color.Color
	style text.Style
}

func (s *shades) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	for _, sp := range s.spans {
		x0, x1 := max(trX(sp.from), c.Min.X), min(trX(sp.to), c.Max.X)
		if x1 <= x0 {
			continue
		}
		c.FillPolygon(s.fill, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
		if sp.label != "" && s.style.Width(sp.label) <= x1-x0+40 {
			c.FillText(s.style, vg.Point{X: x0 + 2, Y: c.Max.Y - 2}, sp.label)
		}
	}
}

// blankLabels is a tick marker whose ticks carry no labels: the upper
// panel of a stack shares the lower one's time axis labels.
type blankLabels struct{ m plot.Ticker }

func (b blankLabels) Ticks(lo, hi float64) []plot.Tick {
	ts := b.m.Ticks(lo, hi)
	for i := range ts {
		ts[i].Label = ""
	}
	return ts
}

// stacked draws two plots one above the other, their data areas aligned
// on one time axis, each with its legend in a strip at the right (one
// width for both), the upper one taking share of the height.
type stacked struct {
	top, bottom         *outsideLegend // their legends
	topPlot, bottomPlot *plot.Plot
	share               float64
}

func newStacked(top, bottom *plot.Plot, share float64) *stacked {
	return &stacked{top: legendOutside(top), bottom: legendOutside(bottom), share: share, topPlot: top, bottomPlot: bottom}
}

// layout splits c into the panels' canvases, their data areas aligned,
// and returns the width of the legend strip.
func (s *stacked) layout(c draw.Canvas) (topC, botC draw.Canvas, lw vg.Length) {
	lw = max(s.top.legend.Rectangle(c).Size().X, s.bottom.legend.Rectangle(c).Size().X) + legendGap + 4
	h := c.Max.Y - c.Min.Y
	split := c.Max.Y - vg.Length(s.share)*h
	topC = draw.Crop(c, 0, -lw, split-c.Min.Y, 0)
	botC = draw.Crop(c, 0, -lw, 0, -(c.Max.Y - split))
	// The panel whose axis is narrower is inset by the difference, on
	// either side.
	td, bd := s.topPlot.DataCanvas(topC), s.bottomPlot.DataCanvas(botC)
	if dl := (td.Min.X - topC.Min.X) - (bd.Min.X - botC.Min.X); dl > 0 {
		botC = draw.Crop(botC, dl, 0, 0, 0)
	} else if dl < 0 {
		topC = draw.Crop(topC, -dl, 0, 0, 0)
	}
	if dr := (topC.Max.X - td.Max.X) - (botC.Max.X - bd.Max.X); dr > 0 {
		botC = draw.Crop(botC, 0, -dr, 0, 0)
	} else if dr < 0 {
		topC = draw.Crop(topC, 0, dr, 0, 0)
	}
	return topC, botC, lw
}

func (s *stacked) Draw(c draw.Canvas) {
	c.SetColor(rgb(0xff, 0xff, 0xff))
	c.Fill(c.Rectangle.Path())
	topC, botC, lw := s.layout(c)
	s.topPlot.Draw(topC)
	s.bottomPlot.Draw(botC)
	legend := func(l plot.Legend, from draw.Canvas, title bool) {
		lc := draw.Crop(c, c.Size().X-lw+legendGap, 0, from.Min.Y-c.Min.Y, -(c.Max.Y - from.Max.Y))
		if title {
			p := s.topPlot
			lc.Max.Y -= p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
		}
		l.Draw(lc)
	}
	legend(s.top.legend, topC, true)
	legend(s.bottom.legend, botC, false)
}
