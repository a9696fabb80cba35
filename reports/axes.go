package reports

import (
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg/draw"
)

// The axis toolkit of the plots: round ticks, duration units, padding,
// and the legend beside the data.

// niceTicks marks an axis at steps of {1, 2, 5}·10^k, the smallest step
// that gives at most max labels (0: 7), each printed with just the decimals its step needs ("0 50 100", never
// "0.00 50.00"), with thousands grouped ("50,000"). neg labels −value (an
// axis drawn upside down, as the raster's clients); minStep, when set, is
// the least step (1 for a count of clients: no client 41.8).
type niceTicks struct {
	neg     bool
	max     int
	minStep float64
}

// niceStep returns the smallest step of {1, 2, 5}·10^k that puts at most
// maxLabels labels on [lo, hi], and the decimals its labels need.
func niceStep(lo, hi float64, maxLabels int) (step float64, decimals int) {
	span := hi - lo
	if !(span > 0) || math.IsInf(span, 0) {
		return 1, 0
	}
	mag := math.Pow(10, math.Floor(math.Log10(span/float64(maxLabels))))
search:
	for ; ; mag *= 10 {
		for _, m := range []float64{1, 2, 5} {
			step = m * mag
			if n := math.Floor(hi/step+1e-9) - math.Ceil(lo/step-1e-9) + 1; n <= float64(maxLabels) {
				break search
			}
		}
	}
	decimals = max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	return step, decimals
}

func (t niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return nil
	}
	maxLabels := t.max
	if maxLabels <= 0 {
		maxLabels = 7
	}
	step, dec := niceStep(lo, hi, maxLabels)
	if step < t.minStep {
		step, dec = t.minStep, 0
	}
	group := max(math.Abs(lo), math.Abs(hi)) >= 1e4 // then every label of the axis
	minor := step / 2                               // steps of 1 and 2: halves
	if m := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9)); math.Abs(m-5) < 1e-9 {
		minor = step / 5 // steps of 5: units
	}
	var ticks []plot.Tick
	for i := math.Ceil(lo/minor - 1e-9); ; i++ {
		v := i * minor
		if v > hi+minor*1e-9 {
			break
		}
		k := v / step
		if math.Abs(k-math.Round(k)) < 1e-6 {
			v = math.Round(k) * step
			label := v
			if t.neg {
				label = -v
			}
			if t.neg && label < 0 {
				ticks = append(ticks, plot.Tick{Value: v}) // above the first client: no client there
				continue
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: fmtGrouped(label, dec, group)})
		} else {
			ticks = append(ticks, plot.Tick{Value: v})
		}
	}
	return ticks
}

// fmtGrouped prints v with dec decimals, thousands grouped by commas when
// group is set.
func fmtGrouped(v float64, dec int, group bool) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', dec, 64)
	if strings.Trim(s, "0.") == "" {
		return "0"
	}
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if v < 0 {
		b.WriteString("−")
	}
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 && group {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}

// tidyAxes gives both axes of p the report's ticks (an axis whose marker a
// plot set itself keeps it).
func tidyAxes(p *plot.Plot) {
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		if _, ok := a.Tick.Marker.(plot.DefaultTicks); ok {
			a.Tick.Marker = niceTicks{}
		}
	}
}

// A durUnit is the unit of a duration axis: s for long spans, ms for short
// ones, µs for the shortest, so labels read "0 0.5 1 ms", not "0.0012".
type durUnit struct {
	name string
	ns   float64 // ns per unit
}

// unitFor picks the unit for an axis whose largest value is top ns.
func unitFor(top float64) durUnit {
	switch {
	case top >= 1e9:
		return durUnit{"s", 1e9}
	case top >= 1e4:
		return durUnit{"ms", 1e6}
	}
	return durUnit{"µs", 1e3}
}

func (u durUnit) of(ns float64) float64 { return ns / u.ns }

// padMax returns the end of an axis whose data end at top: 3 % beyond, so
// the last bar or mark never touches the frame.
func padMax(lo, top float64) float64 {
	if !(top > lo) {
		return lo + 1
	}
	return top + 0.03*(top-lo)
}

// outsideLegend draws a plot with its legend in a strip right of the data
// area, below the title, so the legend never covers data, phase labels or
// reference lines.
type outsideLegend struct {
	p      *plot.Plot
	legend plot.Legend
}

// legendOutside moves p's legend out of its data area.
func legendOutside(p *plot.Plot) *outsideLegend {
	o := &outsideLegend{p: p, legend: p.Legend}
	o.legend.Left, o.legend.Top = true, true
	o.legend.XOffs, o.legend.YOffs = 0, 0
	p.Legend = plot.NewLegend()
	return o
}

const legendGap = 10 // points between the plot and its legend

// layout splits c into the plot's canvas and the legend's.
func (o *outsideLegend) layout(c draw.Canvas) (plotC, legendC draw.Canvas) {
	w := o.legend.Rectangle(c).Size().X
	if w == 0 {
		return c, draw.Canvas{}
	}
	w += legendGap + 4
	plotC = draw.Crop(c, 0, -w, 0, 0)
	legendC = draw.Crop(c, c.Size().X-w+legendGap, 0, 0, 0)
	if o.p.Title.Text != "" {
		legendC.Max.Y -= o.p.Title.TextStyle.Rectangle(o.p.Title.Text).Size().Y + o.p.Title.Padding
	}
	return plotC, legendC
}

func (o *outsideLegend) Draw(c draw.Canvas) {
	plotC, legendC := o.layout(c)
	if o.p.BackgroundColor != nil {
		c.SetColor(o.p.BackgroundColor)
		c.Fill(c.Rectangle.Path())
	}
	o.p.Draw(plotC)
	if legendC.Canvas != nil {
		o.legend.Draw(legendC)
	}
}
