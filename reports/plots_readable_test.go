package reports

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// subMilliCollector holds retries after Retry-After waits of 200-1200 µs
// (a limiter's not_before), a few of them early, and outcomes of three
// results in shares of 1, 3 and 6 tenths.
func subMilliCollector() *Collector {
	const us = int64(1000)
	meta := &timeline.Meta{Recorder: "run", Policy: &timeline.Policy{Base: 100 * ms, Budget: 2000 * ms}}
	var recs []timeline.Record
	results := []string{timeline.ResultGaveUp, timeline.ResultOK, timeline.ResultOK, timeline.ResultOK,
		timeline.ResultCanceled, timeline.ResultCanceled, timeline.ResultCanceled, timeline.ResultCanceled, timeline.ResultCanceled, timeline.ResultCanceled}
	for i, res := range results {
		client := strconv.Itoa(i)
		key := client + "/0"
		at := int64(i) * 10 * ms
		asked := int64(200+100*i) * us
		taken := asked + 50*us
		if i%4 == 0 {
			taken = asked / 4 // early
		}
		recs = append(recs,
			withNB(att(client, key, 1, at, at+us, 429), at+us+asked),
			att(client, key, 2, at+us+taken, at+2*us+taken, 200),
			out(client, key, at, at+int64(i+1)*30*ms, res))
	}
	tol, err := analyzer.ParseCheckSpec("retry-after:tolerance=0.00001") // 10µs
	if err != nil {
		panic(err)
	}
	return collect(meta, Options{Analyzer: analyzer.Options{Checks: []analyzer.CheckSpec{tol}}}, recs...)
}

// The fixes of issue 12's review of the plots, one by one.

// plotOf returns the gonum plot inside a drawn plot.
func plotOf(t *testing.T, d drawn) *plot.Plot {
	t.Helper()
	switch p := d.p.(type) {
	case *outsideLegend:
		return p.p
	case *plot.Plot:
		return p
	}
	t.Fatalf("%s: not drawn (%T): %s", d.Name, d.p, d.Note)
	return nil
}

// labels returns the labels of an axis's ticks over its range.
func labels(a plot.Axis) []string {
	var out []string
	for _, tk := range a.Tick.Marker.Ticks(a.Min, a.Max) {
		if tk.Label != "" {
			out = append(out, tk.Label)
		}
	}
	return out
}

// needlessDecimals says why an axis's labels carry decimals they do not
// need ("0.00 2.50 5.00", "50000.00"), or "".
func needlessDecimals(ls []string) string {
	dec := -1
	for _, l := range ls {
		if l == "0" {
			continue
		}
		_, frac, _ := strings.Cut(l, ".")
		if dec >= 0 && len(frac) != dec {
			return fmt.Sprintf("labels %q mix %d and %d decimals", ls, dec, len(frac))
		}
		dec = len(frac)
	}
	if dec <= 0 {
		return ""
	}
	for _, l := range ls {
		if _, frac, ok := strings.Cut(l, "."); ok && frac[len(frac)-1] != '0' {
			return ""
		}
	}
	return fmt.Sprintf("labels %q all end in 0: %d decimals is one too many", ls, dec)
}

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		lo, hi  float64
		neg     bool
		minStep float64
		want    string
	}{
		{0, 250, false, 0, "0 50 100 150 200 250"},
		{0, 57500, false, 0, "0 10,000 20,000 30,000 40,000 50,000"},
		{0, 1.2, false, 0, "0 0.2 0.4 0.6 0.8 1.0 1.2"},
		{0, 6.3, false, 0, "0 1 2 3 4 5 6"},
		{0, 0.0012, false, 0, "0 0.0002 0.0004 0.0006 0.0008 0.0010 0.0012"},
		{0, 100, false, 0, "0 20 40 60 80 100"},
		{-10013, 700, true, 1, "10,000 8,000 6,000 4,000 2,000 0"},
		{-42.5, -40.5, true, 1, "42 41"}, // one client row: whole clients only
	}
	for _, tt := range tests {
		a := plot.New().X
		a.Min, a.Max, a.Tick.Marker = tt.lo, tt.hi, niceTicks{neg: tt.neg, minStep: tt.minStep}
		got := strings.Join(labels(a), " ")
		if got != tt.want {
			t.Errorf("ticks on [%v, %v] = %q; want %q", tt.lo, tt.hi, got, tt.want)
		}
	}
}

// TestPlotTickLabels: no axis of any plot, the comparison's panels
// included, labels its ticks with needless decimals.
func TestPlotTickLabels(t *testing.T) {
	var buf bytes.Buffer
	if _, err := goldenSynth.write(&buf); err != nil {
		t.Fatal(err)
	}
	c, err := Collect(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var plots []*plot.Plot
	names := []string{}
	layered, err := Collect(bytes.NewReader(layeredSynth{seed: 1}.write(t)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range append(append(c.plots(), subMilliCollector().plots()...), layered.plotQuota()) {
		if d.p != nil {
			plots, names = append(plots, plotOf(t, d)), append(names, d.Name)
		}
	}
	cp := comparePlot(rankSubjects(compareEntries(), make([]*Stats, len(compareEntries()))), "t")
	for _, p := range cp.p.(*tiled).plots[0] {
		plots, names = append(plots, p), append(names, "compare "+p.Title.Text)
	}
	for i, p := range plots {
		for _, a := range []plot.Axis{p.X, p.Y} {
			ls := labels(a)
			if len(ls) == 0 && !strings.HasPrefix(names[i], "compare") {
				t.Errorf("%s: an axis without labels", names[i])
			}
			if why := needlessDecimals(ls); why != "" {
				t.Errorf("%s: %s", names[i], why)
			}
		}
	}
}

// TestLastBarsClearTheFrame: the time axes of the binned plots end beyond
// their last bin, so the last bar does not touch the frame.
func TestLastBarsClearTheFrame(t *testing.T) {
	c := collect(&timeline.Meta{Recorder: "run"}, Options{},
		att("1", "k", 1, 0, ms, 200), att("2", "j", 1, 999*ms, 1000*ms, 200))
	// The last attempt falls in the bin [999ms, 1s): the bars end at 1 s.
	for _, d := range []drawn{c.plotAttempts(), c.plotRaster()} {
		p := plotOf(t, d)
		if p.X.Max < 1.02 || p.X.Max > 1.1 {
			t.Errorf("%s: x axis ends at %v s, the last bar at 1 s; want a margin of 2-10 %%", d.Name, p.X.Max)
		}
	}
}

// TestLegendsOutsideTheData: the legends of the plots with phase labels
// are drawn right of the data area, where they cover nothing.
func TestLegendsOutsideTheData(t *testing.T) {
	var buf bytes.Buffer
	if _, err := goldenSynth.write(&buf); err != nil {
		t.Fatal(err)
	}
	c, err := Collect(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	layered, err := Collect(bytes.NewReader(layeredSynth{seed: 1}.write(t)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range append(c.plots(), layered.plotQuota()) {
		o, ok := d.p.(*outsideLegend)
		if !ok {
			t.Errorf("%s: legend inside the plot (%T)", d.Name, d.p)
			continue
		}
		img := vgimg.New(d.w, d.h)
		cv := draw.New(img)
		plotC, legendC := o.layout(cv)
		data := o.p.DataCanvas(plotC)
		if legendC.Canvas == nil {
			t.Errorf("%s: no legend", d.Name)
			continue
		}
		if legendC.Min.X < data.Max.X {
			t.Errorf("%s: legend starts at x=%v, inside the data area (ends at %v)", d.Name, legendC.Min.X, data.Max.X)
		}
	}
}

// TestRasterClientTicks: with every 34th of 10,000 clients drawn, the
// raster's y axis is labelled in round numbers of clients (0, 2,000, ...),
// not by the sampled rows' ids (10002, 20004, ...).
func TestRasterClientTicks(t *testing.T) {
	meta := &timeline.Meta{Recorder: "run", Fleet: &timeline.Fleet{Clients: 10000}}
	c := NewCollector(meta, Options{})
	for i := range 10000 {
		r := att(strconv.Itoa(i), strconv.Itoa(i)+"/0", 1, int64(i)*ms/10, int64(i)*ms/10+ms, 200)
		c.Add(&r)
	}
	if c.stride != 34 {
		t.Fatalf("stride = %d; want 34", c.stride)
	}
	d := c.plotRaster()
	p := plotOf(t, d)
	ls := labels(p.Y)
	if got, want := strings.Join(ls, " "), "10,000 8,000 6,000 4,000 2,000 0"; got != want {
		t.Errorf("raster y labels = %q; want %q", got, want)
	}
	if !strings.Contains(p.Y.Label.Text, "every 34th of 10,000") {
		t.Errorf("raster y axis = %q; want it to say every 34th of 10,000", p.Y.Label.Text)
	}
	// The first and last sampled clients are inside the axis.
	if p.Y.Max < 0 || p.Y.Min > -9996 {
		t.Errorf("raster y range [%v, %v] leaves out clients 0 or 9996", p.Y.Min, p.Y.Max)
	}
}

// TestRetryAfterUnits: waits under a millisecond are drawn in ms on equal
// axes that end just past the longest wait, not on a 0-0.0012 s axis.
func TestRetryAfterUnits(t *testing.T) {
	d := subMilliCollector().plotRetryAfter()
	p := plotOf(t, d)
	if !strings.HasSuffix(p.X.Label.Text, "(ms)") || !strings.HasSuffix(p.Y.Label.Text, "(ms)") {
		t.Errorf("axes %q, %q; want both in ms", p.X.Label.Text, p.Y.Label.Text)
	}
	// The longest wait is 1.15 ms (taken), plus 3 %.
	if want := 1.15 * 1.03; math.Abs(p.X.Max-want) > 1e-9 || p.Y.Max != p.X.Max || p.X.Min != 0 || p.Y.Min != 0 {
		t.Errorf("ranges x [%v, %v], y [%v, %v]; want both [0, %v]", p.X.Min, p.X.Max, p.Y.Min, p.Y.Max, want)
	}
	if got := strings.Join(labels(p.X), " "); got != "0 0.2 0.4 0.6 0.8 1.0" {
		t.Errorf("x labels %q", got)
	}
	for _, tt := range []struct {
		top  float64
		want string
	}{{5e3, "µs"}, {1.2e6, "ms"}, {999e6, "ms"}, {1e9, "s"}, {90e9, "s"}} {
		if got := unitFor(tt.top).name; got != tt.want {
			t.Errorf("unitFor(%v ns) = %s; want %s", tt.top, got, tt.want)
		}
	}
}

// TestCompletionShares: each result's curve rises to its share of all
// logical requests (gave-up 1 of 10 is 10 %, not 100 %), and the ends add
// up to 100 %.
func TestCompletionShares(t *testing.T) {
	c := subMilliCollector()
	want := map[string]float64{timeline.ResultOK: 30, timeline.ResultGaveUp: 10, timeline.ResultCanceled: 60}
	sum := 0.0
	curves := c.completionCurves(unitFor(1e9))
	if len(curves) != len(want) {
		t.Fatalf("%d curves; want %d", len(curves), len(want))
	}
	for _, cv := range curves {
		last := cv.xys[len(cv.xys)-1].Y
		sum += last
		if math.Abs(last-want[cv.result]) > 1e-9 {
			t.Errorf("%s curve ends at %v%%; want %v%%", cv.result, last, want[cv.result])
		}
		for i := 1; i < len(cv.xys); i++ {
			if cv.xys[i].Y < cv.xys[i-1].Y {
				t.Errorf("%s curve falls at point %d", cv.result, i)
			}
		}
	}
	if math.Abs(sum-100) > 1e-9 {
		t.Errorf("curves end at %v%% together; want 100%%", sum)
	}
	p := plotOf(t, c.plotCompletion())
	if p.Y.Min != 0 || p.Y.Max != 100 {
		t.Errorf("completion y range [%v, %v]; want [0, 100]", p.Y.Min, p.Y.Max)
	}
}
