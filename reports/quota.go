package reports

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// quotaBins is the most bars the quota plot draws.
const quotaBins = 200

// PlotQuota is the quota-use plot: drawn only when the timeline's meta
// lists the published limits (timeline.Meta.Limits).
const PlotQuota = "quota"

// limitColors are the colours of the published limits, in meta order
// (then again); green stays the accepted requests'.
var limitColors = []color.Color{
	rgb(0xff, 0x7f, 0x0e), // orange
	rgb(0xd6, 0x27, 0x28), // red
	rgb(0x94, 0x67, 0xbd), // purple
	rgb(0x1f, 0x77, 0xb4), // blue
	rgb(0x8c, 0x56, 0x4b), // brown
	rgb(0xe3, 0x77, 0xc2), // pink
	rgb(0xbc, 0xbd, 0x22), // olive
	rgb(0x17, 0xbe, 0xcf), // cyan
}

// quotaSeries accumulates, on the collector's time bins, what the quota
// plot draws: the requests the quota accepted and, per published limit,
// the requests it rejected. Its memory is a few bins per limit, whatever
// the run's length.
type quotaSeries struct {
	limits []timeline.Quota
	index  map[string]int // the name an attempt's Limit gives a limit ("tier/name" under tiers) → series
	// rejected[i] is limit i's rejections per bin; after the limits come
	// rate limits that named no limit, then those that named one the meta
	// does not list.
	rejected [][]uint64
	accepted []uint64
	totals   []int64 // per series
	accTotal int64
	tiers    int // distinct tiers among the limits
}

// Series after the limits.
const (
	seriesUnnamed = iota // a rate limit that named no limit
	seriesOther          // a limit the meta does not list
	extraSeries
)

func newQuotaSeries(meta *timeline.Meta, bins int) *quotaSeries {
	if len(meta.Limits) == 0 {
		return nil
	}
	q := &quotaSeries{limits: meta.Limits, index: make(map[string]int)}
	tiers := map[string]bool{}
	for i, l := range q.limits {
		q.index[limitID(&l)] = i
		tiers[l.Tier] = true
	}
	q.tiers = len(tiers)
	n := len(q.limits) + extraSeries
	q.rejected = make([][]uint64, n)
	for i := range q.rejected {
		q.rejected[i] = make([]uint64, bins)
	}
	q.accepted = make([]uint64, bins)
	q.totals = make([]int64, n)
	return q
}

// limitID is the name a rejection records for limit l (Attempt.Limit).
func limitID(l *timeline.Quota) string {
	if l.Tier != "" {
		return l.Tier + "/" + l.Name
	}
	return l.Name
}

func (q *quotaSeries) fold() {
	foldSum(q.accepted)
	for _, s := range q.rejected {
		foldSum(s)
	}
}

// add counts attempt a in bin: accepted when its status is 2xx (an
// attempt the client left before the answer was still charged), rejected
// by the limit it names, or by no named limit when the analyzer's rule
// makes it a rate limit. Only attempts of quota phases count.
func (q *quotaSeries) add(a *timeline.Attempt, bin int) {
	switch {
	case a.Status >= 200 && a.Status < 300:
		q.accepted[bin]++
		q.accTotal++
		return
	case a.Limit != "":
		i, ok := q.index[a.Limit]
		if !ok {
			i = len(q.limits) + seriesOther
		}
		q.rejected[i][bin]++
		q.totals[i]++
	case analyzer.ClassifyResponse(a) == analyzer.ResponseRateLimit:
		i := len(q.limits) + seriesUnnamed
		q.rejected[i][bin]++
		q.totals[i]++
	}
}

// inQuotaPhase reports whether an arrival at t falls in a quota phase (every
// arrival does when the meta states no phases).
func (c *Collector) inQuotaPhase(t int64) bool {
	phases := c.meta.Phases
	if len(phases) == 0 {
		return true
	}
	in := func(ph *timeline.Phase) bool { return t >= ph.Start && (ph.End == 0 || t < ph.End) }
	i := c.quotaPh
	if i >= len(phases) || !in(&phases[i]) {
		i = slices.IndexFunc(phases, func(ph timeline.Phase) bool { return in(&ph) })
		if i < 0 {
			return false
		}
		c.quotaPh = i
	}
	return strings.HasPrefix(phases[i].Respond, "quota")
}

// fmtRate prints a rate per second as fmtNum prints figures: 10/s, 5/s,
// 0.12/s, 1.67/s.
func fmtRate(r float64) string { return fmtNum(r) + "/s" }

// limitLabel is a limit as its legend entry states it: "minute 300/1m
// (5/s)", "second 10/s, burst 20", "free/minute 60/1m (1/s) per client".
func limitLabel(l *timeline.Quota) string {
	s := limitID(l)
	switch {
	case l.Limit > 0 && l.Window == int64(time.Second):
		s += " " + fmtCount(l.Limit) + "/s"
	case l.Limit > 0 && l.Window > 0:
		s += fmt.Sprintf(" %s/%s (%s)", fmtCount(l.Limit), windowText(l.Window), fmtRate(l.Rate))
	default:
		s += " " + fmtRate(l.Rate)
	}
	if l.Algorithm == "token-bucket" && l.Burst > 0 && l.Burst != l.Limit {
		s += ", burst " + fmtCount(l.Burst)
	}
	if l.Key != "" && l.Key != "global" {
		s += " per " + l.Key
	}
	return s
}

// windowText prints a window as limits are published: 1m, 1h, 1d, 90s.
func windowText(ns int64) string {
	d := time.Duration(ns)
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return fmtDur(d)
}

// lineRate is the height of limit l's line, requests per second: its
// sustained rate, times the fleet's clients for a per-client limit; ok is
// false when no line can be drawn (a limit per API key or endpoint: how
// many keys the run used is unknown).
func (c *Collector) lineRate(l *timeline.Quota) (rate float64, per string, ok bool) {
	switch l.Key {
	case "", "global":
		return l.Rate, "", true
	case "client":
		if f := c.meta.Fleet; f != nil && f.Clients > 0 {
			return l.Rate * float64(f.Clients), fmt.Sprintf(" × %s clients", fmtCount(f.Clients)), true
		}
	}
	return 0, "", false
}

// limitKey is a limit's legend thumbnail: its rejections' swatch under its
// rate's dashed line.
type limitKey struct {
	fill color.Color
	line *draw.LineStyle // nil: no line drawn
}

func (k limitKey) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	mid := r.Min.Y + (r.Max.Y-r.Min.Y)*0.55
	c.FillPolygon(k.fill, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, {X: r.Max.X, Y: mid}, {X: r.Min.X, Y: mid}})
	if k.line != nil {
		y := r.Min.Y + (r.Max.Y-r.Min.Y)*0.8
		c.StrokeLine2(*k.line, r.Min.X, y, r.Max.X, y)
	}
}

// hline is a horizontal reference line at Y across the data area.
type hline struct {
	y     float64
	style draw.LineStyle
}

func (h *hline) Plot(c draw.Canvas, plt *plot.Plot) {
	_, trY := plt.Transforms(&c)
	y := trY(h.y)
	if !c.ContainsY(y) {
		return
	}
	c.StrokeLine2(h.style, c.Min.X, y, c.Max.X, y)
}

// lighter mixes a colour with white: the rejections' areas, so the
// limit's own line stays visible over them.
func lighter(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8((v>>8)*6/10 + 255*4/10) }
	return color.NRGBA{R: mix(r), G: mix(g), B: mix(b), A: 0xff}
}

// Plot 6: per published limit, the requests the quota accepted and the
// ones each limit rejected, over time, against each limit's rate.
func (c *Collector) plotQuota() drawn {
	d := drawn{Plot: Plot{
		Name:  PlotQuota,
		Title: "Quota use by limit",
		Caption: "Requests per second in the quota phases: accepted (green), and rejected by each published limit, stacked on top in its colour. " +
			"The dashed lines are the limits' sustained rates (a per-client limit's times the fleet's clients): traffic that stays above a limit's line " +
			"spends that limit faster than it refills. A request counts as one unit.",
	}, w: plotWidth, h: plotHeight}
	q := c.quota
	var rejected int64
	for _, n := range q.totals {
		rejected += n
	}
	if q.accTotal+rejected == 0 {
		d.Note = "No request was answered in a quota phase."
		return d
	}
	used, width := c.bins.used, c.bins.width
	acc := slices.Clone(q.accepted)
	rej := make([][]uint64, len(q.rejected))
	for i := range rej {
		rej[i] = slices.Clone(q.rejected[i])
	}
	// Rates read steadily over bins of a second or more (at most
	// quotaBins of them): finer, a few requests a second are mostly noise.
	for used > quotaBins || (width < int64(time.Second) && used > 1) {
		foldSum(acc)
		for _, s := range rej {
			foldSum(s)
		}
		width *= 2
		used = (used + 1) / 2
	}
	sec := seconds(float64(width))
	end := int64(used) * width
	tu := unitFor(float64(end))
	binW := tu.of(float64(width))
	p := newPlot(d.Title, "time since start ("+tu.name+")", "requests per second ("+binWidthText(width)+" bins)")
	tidyAxes(p)
	if b := c.phaseBands(end, tu); b != nil {
		p.Add(b)
	}
	cum := make([]float64, used)
	peak := 0.0
	area := func(counts []uint64, fill color.Color) {
		lower := slices.Clone(cum)
		ring := make(plotter.XYs, 0, 4*used)
		for i := range used {
			cum[i] += float64(counts[i]) / sec
			peak = max(peak, cum[i])
			ring = append(ring, plotter.XY{X: float64(i) * binW, Y: cum[i]}, plotter.XY{X: float64(i+1) * binW, Y: cum[i]})
		}
		for i := used - 1; i >= 0; i-- {
			ring = append(ring, plotter.XY{X: float64(i+1) * binW, Y: lower[i]}, plotter.XY{X: float64(i) * binW, Y: lower[i]})
		}
		p.Add(&plotter.Polygon{XYs: []plotter.XYs{ring}, Color: fill})
	}
	if q.accTotal > 0 {
		area(acc, classColors[class2xx])
	}
	p.Legend.Add(fmt.Sprintf("accepted (%s)", fmtCount(q.accTotal)), swatch{classColors[class2xx]})

	// The lines, after the areas; the y axis fits the traffic and the
	// lines near it, so a limit far above the traffic does not flatten it.
	type lineAt struct {
		y     float64
		style draw.LineStyle
	}
	var lines []lineAt
	var entries []func(top float64)
	lowest := math.Inf(1)
	for i := range q.limits {
		l := &q.limits[i]
		clr := limitColors[i%len(limitColors)]
		fill := lighter(clr)
		if q.totals[i] > 0 {
			area(rej[i], fill)
		}
		rate, per, ok := c.lineRate(l)
		label := limitLabel(l) + per
		var style *draw.LineStyle
		if ok {
			st := draw.LineStyle{Color: clr, Width: 1.6, Dashes: []vg.Length{5, 3}}
			style = &st
			lines = append(lines, lineAt{rate, st})
			lowest = min(lowest, rate)
		} else {
			label += " (no line: the keys are unknown)"
		}
		n := q.totals[i]
		y := rate
		entries = append(entries, func(top float64) {
			text := label + ": " + fmtCount(n) + " rejected"
			if n == 0 {
				text = label + ": none rejected"
			}
			if style != nil && y > top {
				text += " (line above the plot)"
			}
			p.Legend.Add(text, limitKey{fill: fill, line: style})
		})
	}
	for k, name := range []string{"a rate limit naming no limit", "limits the meta does not list"} {
		i := len(q.limits) + k
		if n := q.totals[i]; n > 0 {
			area(rej[i], colorSkip)
			entries = append(entries, func(float64) {
				p.Legend.Add(fmt.Sprintf("rejected by %s (%s)", name, fmtCount(n)), swatch{colorSkip})
			})
		}
	}
	top := peak
	for _, l := range lines {
		if l.y <= 1.5*peak {
			top = max(top, l.y)
		}
	}
	if lowest < math.Inf(1) {
		top = max(top, lowest)
	}
	top *= 1.15 // room for the phase labels
	for _, l := range lines {
		p.Add(&hline{y: l.y, style: l.style})
	}
	for _, e := range entries {
		e(top)
	}
	p.X.Min, p.Y.Min = 0, 0
	p.X.Max = padMax(0, float64(used)*binW)
	p.Y.Max = top
	if q.tiers > 1 {
		d.Note = "Accepted requests are every tier's together: the timeline does not record which tier an accepted request was charged to."
	}
	d.p = legendOutside(p)
	return d
}
