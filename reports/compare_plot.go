package reports

import (
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/retrylab/retrylab/analyzer"
)

// The comparison plot (Plot 6) and its plotters: the panels of bars and
// the tiles that align them beside the subjects' names.

// Colours of the comparison plot: a subject's verdict, and a bar's status.
var (
	colorInconclusive = rgb(0xe6, 0x9f, 0x00) // amber: neither pass nor fail
	colorUnjudged     = rgb(0x6b, 0x8e, 0xb5) // slate blue: no check judges the figure
)

// verdictColor is the colour of a subject's verdict in the comparison plot.
func verdictColor(verdict string) color.Color {
	switch verdict {
	case analyzer.VerdictPass:
		return colorPass
	case analyzer.VerdictInconclusive:
		return colorInconclusive
	}
	return colorWarn
}

// statusMoot is the status a comparison shows instead of a pass for a
// subject none of whose logical requests succeeded: a quick failure, few
// attempts or no retries at all are no merit, so nothing of it is green.
const statusMoot = "moot"

// noneSucceeded reports whether none of r's logical requests succeeded (its
// success rate is known and 0).
func noneSucceeded(r Ranked) bool {
	s := r.Figures[FigureSuccess]
	return !math.IsNaN(s) && s <= 0
}

// shownStatus is the status the comparison shows for r's figure kf: the
// status of the check that judges it, but moot instead of pass when none
// of r's logical requests succeeded.
func shownStatus(r Ranked, kf keyFigure) string {
	st := r.Status[kf.id]
	if st == analyzer.StatusPass && noneSucceeded(r) {
		return statusMoot
	}
	return st
}

// barColor is the colour of a bar: the status of the check that judges
// the figure, or the colour of figures no check judges.
func barColor(kf keyFigure, status string) color.Color {
	switch {
	case kf.check == "":
		return colorUnjudged
	case status == analyzer.StatusPass:
		return colorPass
	case status == analyzer.StatusFail:
		return colorWarn
	}
	return colorSkip
}

// Plot 6: the subjects side by side on the key figures.
func comparePlot(ranking []Ranked, title string) drawn {
	d := drawn{Plot: Plot{
		Name:  PlotCompare,
		Title: "Subjects on the key figures",
		Caption: "Each panel is one key figure, subjects in rank order, best on top, each with its verdict (pass, fail or inconclusive). " +
			"A bar's colour is the status of the check that judges its figure (herd statistic: waves; early retries: retry-after; amplification: amplification; p99 completion: budget): " +
			"green pass, red fail, grey skipped; no check judges the success rate, so its bars are blue. " +
			"A subject none of whose logical requests succeeded has no green bar: its passes are grey, for failing fast is no merit. The key under the plot says the same.",
	}}
	n := len(ranking)
	d.w = 12 * vg.Inch
	d.h = max(3*vg.Inch, 1.3*vg.Inch+vg.Length(n)*0.32*vg.Inch) + compareKeyHeight
	var panels []*plot.Plot
	var bars []*hbars
	for _, kf := range keyFigures {
		unit := kf.unit
		hint := "lower is better"
		if !kf.lowerBetter {
			hint = "higher is better"
		}
		p := newPanel(kf.title, unit+" ("+hint+")")
		p.Title.TextStyle.Font.Size = 11
		p.X.Label.TextStyle.Font.Size = 9
		p.X.Tick.Marker = niceTicks{max: 5}
		hb := &hbars{style: p.X.Tick.Label}
		hb.style.XAlign = draw.XLeft
		hb.style.YAlign = draw.YCenter
		top, known := 0.0, 0
		for j, r := range ranking {
			y := float64(n - 1 - j)
			v := r.Figures[kf.id]
			st := shownStatus(r, kf)
			hb.bars = append(hb.bars, hbar{y: y, value: v, label: figureText(kf.id, v), status: st, fill: barColor(kf, st)})
			if !math.IsNaN(v) {
				top, known = max(top, v), known+1
			}
		}
		if known == 0 {
			// Nothing to draw: say why instead of a column of n/a.
			hb.note = []string{"not measured in any run"}
			if kf.check != "" {
				hb.note = append(hb.note, "(the "+kf.check+" check was skipped)")
			}
			// No numbers on its axis, but the labels' height, so the
			// panels stay aligned.
			p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: " "}})
		}
		p.Add(hb)
		bars = append(bars, hb)
		ticks := make([]plot.Tick, n)
		for j := range ranking {
			ticks[j] = plot.Tick{Value: float64(n - 1 - j)} // names and verdicts are drawn left of the panels
		}
		p.Y.Tick.Marker = plot.ConstantTicks(ticks)
		p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
		p.X.Min = 0
		switch {
		case kf.id == FigureSuccess:
			p.X.Max = 100 // a share: never beyond 100 %
		case top > 0:
			p.X.Max = top * 1.45 // room for the value labels
		default:
			p.X.Max = 1
		}
		panels = append(panels, p)
	}
	d.p = &tiled{title: title, plots: [][]*plot.Plot{panels}, bars: bars, ranking: ranking}
	return d
}

// compareKeyHeight is the height of the key under the comparison plot.
const compareKeyHeight = 0.45 * vg.Inch

// tiled draws a row of aligned panels under a common title: the subjects'
// names and verdicts left of them, the key to the colours under them.
type tiled struct {
	title   string
	plots   [][]*plot.Plot
	bars    []*hbars // of the panels, in order
	ranking []Ranked
}

// compareStyle is the text style of the comparison's labels and key.
func compareStyle(size vg.Length) draw.TextStyle {
	sty := newPlot("", "", "").Title.TextStyle
	sty.Font.Size = size
	return sty
}

const verdictPad = 3 // points of padding inside a verdict badge

func (t *tiled) Draw(c draw.Canvas) {
	c.SetColor(rgb(0xff, 0xff, 0xff))
	c.Fill(c.Rectangle.Path())
	sty := compareStyle(14)
	c.FillText(sty, vg.Point{X: c.Center().X, Y: c.Max.Y - 4}, t.title)
	h := sty.Height(t.title) + 12

	// The subjects' column: name, then the verdict as a badge.
	name, badge := compareStyle(9), compareStyle(8)
	var nameW, badgeW vg.Length
	for _, r := range t.ranking {
		nameW = max(nameW, name.Width(r.Subject))
		badgeW = max(badgeW, badge.Width(strings.ToUpper(r.Verdict))+2*verdictPad)
	}
	colW := nameW + badgeW + 14

	inner := draw.Crop(c, colW, 0, compareKeyHeight, -h)
	tiles := draw.Tiles{Rows: len(t.plots), Cols: len(t.plots[0]), PadX: 10, PadY: 6, PadTop: 2, PadBottom: 2, PadLeft: 4, PadRight: 6}
	canvases := plot.Align(t.plots, tiles, inner)
	for i, row := range t.plots {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	if len(t.plots[0]) > 0 {
		first := t.plots[0][0]
		dc := first.DataCanvas(canvases[0][0])
		_, trY := first.Transforms(&dc)
		n := len(t.ranking)
		for j, r := range t.ranking {
			y := trY(float64(n - 1 - j))
			ns := name
			ns.XAlign, ns.YAlign = draw.XLeft, draw.YCenter
			c.FillText(ns, vg.Point{X: c.Min.X + 6, Y: y}, r.Subject)
			t.drawBadge(c, badge, vg.Point{X: c.Min.X + 10 + nameW, Y: y}, r.Verdict)
		}
	}
	t.drawKey(draw.Crop(c, colW, 0, 0, -(c.Size().Y - compareKeyHeight)))
}

// drawBadge draws a verdict as a filled badge whose left middle is at.
func (t *tiled) drawBadge(c draw.Canvas, sty draw.TextStyle, at vg.Point, verdict string) {
	label := strings.ToUpper(verdict)
	w, hgt := sty.Width(label)+2*verdictPad, sty.Height(label)+2
	fill := verdictColor(verdict)
	c.FillPolygon(fill, []vg.Point{{X: at.X, Y: at.Y - hgt/2}, {X: at.X + w, Y: at.Y - hgt/2}, {X: at.X + w, Y: at.Y + hgt/2}, {X: at.X, Y: at.Y + hgt/2}})
	sty.Color = rgb(0xff, 0xff, 0xff)
	if verdict == analyzer.VerdictInconclusive {
		sty.Color = rgb(0, 0, 0) // black reads better on amber
	}
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	c.FillText(sty, vg.Point{X: at.X + verdictPad, Y: at.Y}, label)
}

// drawKey explains the colours, on one line under the panels.
func (t *tiled) drawKey(c draw.Canvas) {
	sty := compareStyle(9)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	y := c.Min.Y + c.Size().Y/2
	x := c.Min.X + 4
	text := func(s string, clr color.Color) {
		st := sty
		st.Color = clr
		c.FillText(st, vg.Point{X: x, Y: y}, s)
		x += st.Width(s) + 6
	}
	swatch := func(label string, clr color.Color) {
		s := vg.Length(8)
		c.FillPolygon(clr, []vg.Point{{X: x, Y: y - s/2}, {X: x + s, Y: y - s/2}, {X: x + s, Y: y + s/2}, {X: x, Y: y + s/2}})
		x += s + 3
		text(label, rgb(0, 0, 0))
		x += 6
	}
	text("Verdict:", colorRef)
	for _, v := range []string{analyzer.VerdictPass, analyzer.VerdictFail, analyzer.VerdictInconclusive} {
		swatch(v, verdictColor(v))
	}
	x += 18
	text("Bars, by the check that judges the figure:", colorRef)
	swatch("pass", colorPass)
	swatch("fail", colorWarn)
	swatch("skipped, or no request succeeded", colorSkip)
	swatch("no check (success rate)", colorUnjudged)
}

// hbars draws horizontal bars from 0 with their value (and FAIL) beside,
// or inside the bar's end when there is no room beside it; note, when
// set, replaces the bars (a figure no run measured).
type hbars struct {
	bars  []hbar
	style draw.TextStyle
	note  []string
}

type hbar struct {
	y, value float64
	label    string // the value as the ranking table prints it (figureText)
	status   string
	fill     color.Color
}

func (h *hbars) Plot(c draw.Canvas, plt *plot.Plot) {
	if len(h.note) > 0 {
		sty := h.style
		sty.Color = colorRef
		sty.XAlign = draw.XCenter
		ctr := c.Center()
		lh := sty.Height("M") * 1.3
		for i, line := range h.note {
			c.FillText(sty, vg.Point{X: ctr.X, Y: ctr.Y + lh*(vg.Length(len(h.note)-1)/2-vg.Length(i))}, line)
		}
		return
	}
	trX, trY := plt.Transforms(&c)
	for _, b := range h.bars {
		y := trY(b.y)
		x0 := trX(0)
		sty := h.style
		if math.IsNaN(b.value) {
			sty.Color = colorSkip
			c.FillText(sty, vg.Point{X: x0 + 3, Y: y}, "n/a")
			continue
		}
		x1 := min(trX(math.Max(b.value, 0)), c.Max.X)
		half := (trY(b.y+0.35) - trY(b.y-0.35)) / 2
		fill := b.fill
		if fill == nil {
			fill = colorSkip
		}
		if x1 > x0 {
			c.FillPolygon(fill, c.ClipPolygonXY([]vg.Point{{X: x0, Y: y - half}, {X: x1, Y: y - half}, {X: x1, Y: y + half}, {X: x0, Y: y + half}}))
		}
		label := b.label
		if b.status == analyzer.StatusFail {
			label += "  FAIL"
			sty.Color = colorWarn
		}
		if x1+3+sty.Width(label) <= c.Max.X || x1-x0 < sty.Width(label)+6 {
			c.FillText(sty, vg.Point{X: x1 + 3, Y: y}, label)
			continue
		}
		sty.Color = rgb(0xff, 0xff, 0xff) // inside the bar's end
		sty.XAlign = draw.XRight
		c.FillText(sty, vg.Point{X: x1 - 3, Y: y}, label)
	}
}

func (h *hbars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = 0, 0
	ymin, ymax = math.Inf(1), math.Inf(-1)
	for _, b := range h.bars {
		if !math.IsNaN(b.value) {
			xmax = math.Max(xmax, b.value)
		}
		ymin, ymax = math.Min(ymin, b.y), math.Max(ymax, b.y)
	}
	return
}
