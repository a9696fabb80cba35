package reports

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// capSynth is a synthetic run against a stub with finite capacity: 10
// workers × 50 ms (200 requests/s), a queue of 100, an open-loop fleet at
// 160 requests/s for 40 s, and a trigger that leaves 30 % of the workers
// from 10 s to 15 s. The queue is a fluid: the backlog drains at the
// workers' rate between arrivals, an arrival waits for the backlog ahead
// of it beyond the busy workers, and finds the queue full when that
// backlog exceeds it (a 503 with Limit "capacity"). A client gives up on
// an attempt after 250 ms and retries after full jitter (100 ms–1 s), up
// to attempts, spending a fleet-wide budget of one token per retry when
// budget > 0 (each first attempt earns budget tokens, at most 10).
type capSynth struct {
	seed     uint64
	attempts int
	budget   float64
}

const (
	capWorkers = 10
	capQueue   = 100
	capService = 50 * time.Millisecond
	capTimeout = 250 * time.Millisecond
)

func (s capSynth) meta() *timeline.Meta {
	return &timeline.Meta{
		Format: timeline.Format, Recorder: "run", Scenario: "metastable", Subject: "synthetic", Seed: int64(s.seed),
		Start:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration: int64(45 * time.Second),
		Phases: []timeline.Phase{
			{Name: "steady", Start: 0, End: int64(10 * time.Second), Respond: "ok"},
			{Name: "trigger", Start: int64(10 * time.Second), End: int64(15 * time.Second), Respond: "ok", Capacity: 0.3},
			{Name: "after", Start: int64(15 * time.Second), Respond: "ok"},
		},
		Fleet:    &timeline.Fleet{Clients: 6400, Requests: 1, Start: "poisson 160/s", AttemptTimeout: int64(250 * time.Millisecond)},
		Capacity: &timeline.Capacity{Concurrency: capWorkers, Queue: capQueue, Service: int64(capService), Dist: "fixed", Discipline: "fifo"},
	}
}

func (s capSynth) records() []timeline.Record {
	rng := rand.New(rand.NewPCG(s.seed, 17))
	meta := s.meta()
	share := func(t int64) float64 {
		for _, ph := range meta.Phases {
			if t >= ph.Start && (ph.End == 0 || t < ph.End) && ph.Capacity > 0 {
				return ph.Capacity
			}
		}
		return 1
	}
	type pending struct {
		at       int64
		n        int
		client   string
		attempt  int
		schedule int64
	}
	var queue []pending
	n := 0
	for t := 0.0; t < 40; t += rng.ExpFloat64() / 160 {
		c := strconv.Itoa(n)
		queue = append(queue, pending{at: int64(t * 1e9), n: n, client: c, attempt: 1, schedule: int64(t * 1e9)})
		n++
	}
	less := func(a, b pending) int {
		if a.at != b.at {
			return int(min(max(a.at-b.at, -1), 1))
		}
		return a.n - b.n
	}
	type ev struct {
		at  int64
		rec timeline.Record
	}
	var evs []ev
	backlog, last := 0.0, int64(0) // requests in the server (queued and in service)
	tokens := 10.0
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		workers := capWorkers * share(p.at)
		rate := workers / capService.Seconds()
		backlog = max(0, backlog-rate*float64(p.at-last)/1e9)
		last = p.at
		if p.attempt == 1 && s.budget > 0 {
			tokens = min(10, tokens+s.budget)
		}
		a := timeline.Attempt{Client: p.client, Key: p.client + "/0", Attempt: p.attempt, Method: "GET", Path: "/c/" + p.client + "/r/0",
			At: p.at, Status: 200, Phase: "steady"}
		failed := false
		switch wait := s.wait(meta, p.at, backlog-workers); {
		case backlog-workers >= capQueue:
			a.Status, a.Limit, a.Done = 503, analyzer.LimitCapacity, p.at+int64(time.Millisecond)
			failed = true
		default:
			backlog++
			a.Queue, a.Service = int64(wait*1e9), int64(capService)
			a.Done = p.at + a.Queue + a.Service
			if time.Duration(a.Done-p.at) > capTimeout {
				a.Fault, failed = timeline.FaultAbandoned, true
			}
		}
		evs = append(evs, ev{a.Done, timeline.Record{Type: timeline.TypeAttempt, Attempt: a}})
		gaveUp := a.Done
		if a.Fault != "" {
			gaveUp = p.at + int64(capTimeout)
		}
		if failed && p.attempt < s.attempts && (s.budget == 0 || tokens >= 1) {
			if s.budget > 0 {
				tokens--
			}
			b := min(time.Second, 100*time.Millisecond<<(p.attempt-1))
			p.at, p.attempt = gaveUp+rng.Int64N(int64(b)+1), p.attempt+1
			i, _ := slices.BinarySearchFunc(queue, p, less)
			queue = slices.Insert(queue, i, p)
			continue
		}
		o := timeline.Outcome{Client: p.client, Key: p.client + "/0", Scheduled: p.schedule, Start: p.schedule, End: gaveUp, Result: timeline.ResultOK, Status: 200, Attempts: p.attempt}
		if failed {
			o.Result, o.Status = timeline.ResultGaveUp, a.Status
		}
		evs = append(evs, ev{o.End, timeline.Record{Type: timeline.TypeOutcome, Outcome: o}})
	}
	slices.SortStableFunc(evs, func(a, b ev) int { return int(min(max(a.at-b.at, -1), 1)) })
	meta.Scheduled = int64(n)
	recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: meta}}
	for _, e := range evs {
		recs = append(recs, e.rec)
	}
	return append(recs, timeline.Record{Type: timeline.TypeEnd, End: &timeline.End{At: evs[len(evs)-1].at, Reason: timeline.EndCompleted}})
}

// wait is how long an arrival at t waits for ahead requests to be served
// (0 when ahead ≤ 0), at the workers' rate of each phase it spans.
func (capSynth) wait(meta *timeline.Meta, t int64, ahead float64) float64 {
	from := t
	for _, ph := range meta.Phases {
		if ahead <= 0 {
			break
		}
		if ph.End != 0 && t >= ph.End {
			continue
		}
		sh := ph.Capacity
		if sh <= 0 {
			sh = 1
		}
		rate := capWorkers * sh / capService.Seconds() // per second
		if ph.End == 0 || float64(ph.End-t)/1e9*rate >= ahead {
			t += int64(ahead / rate * 1e9)
			ahead = 0
			break
		}
		ahead -= float64(ph.End-t) / 1e9 * rate
		t = ph.End
	}
	return float64(t-from) / 1e9
}

func (s capSynth) write(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	for _, r := range s.records() {
		var err error
		switch r.Type {
		case timeline.TypeMeta:
			err = enc.EncodeMeta(r.Meta)
		case timeline.TypeAttempt:
			err = enc.EncodeAttempt(&r.Attempt)
		case timeline.TypeOutcome:
			err = enc.EncodeOutcome(&r.Outcome)
		case timeline.TypeEnd:
			err = enc.EncodeEnd(r.End)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The synthetic fleets: one whose retry budget lets the server recover,
// one that retries every failure and keeps it down.
var (
	capRecovers   = capSynth{seed: 1, attempts: 3, budget: 0.1}
	capMetastable = capSynth{seed: 1, attempts: 3}
)

// TestCapacityPlotGolden draws the recovering run's capacity plot against
// its golden image; the report holds it second, after the attempts plot,
// and states the server's capacity, the trigger's share and the fleet's
// per-attempt timeout.
func TestCapacityPlotGolden(t *testing.T) {
	dir := t.TempDir()
	rep, err := WriteFrom(dir, bytes.NewReader(capRecovers.write(t)), nil, Options{DPI: goldenDPI})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range rep.Plots {
		names = append(names, p.Name)
	}
	if len(names) < 2 || names[1] != PlotCapacity {
		t.Fatalf("plots %v; want the capacity plot second", names)
	}
	p := rep.Plots[1]
	if p.PNG == "" {
		t.Fatalf("capacity plot not drawn: %s", p.Note)
	}
	checkPlotFiles(t, dir, p)
	html, err := os.ReadFile(rep.HTML)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`id="plot-capacity"`, "10 workers × 50ms (fixed), queue 100 fifo: 200/s", "ok, at 30% of capacity",
		"<dt>attempt timeout</dt><dd>250ms</dd>"} {
		if !strings.Contains(string(html), w) {
			t.Errorf("report.html lacks %q", w)
		}
	}
}

// TestCapacityPlotFromTheAnalyzer: the plot draws the analyzer's facts —
// its recovery instant, its metastable judgement, the counts of its bins
// — and says so in its legend; none is recomputed.
func TestCapacityPlotFromTheAnalyzer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		synth  capSynth
		status string
		legend func(v *analyzer.CheckResult, l *analyzer.LoadSeries) []string
	}{
		{"recovers", capRecovers, analyzer.StatusPass, func(v *analyzer.CheckResult, l *analyzer.LoadSeries) []string {
			return []string{"recovered " + fmtDur(l.Recovery.Time) + " after the trigger", "trigger: 30%", "capacity: 10 workers ÷ 50ms"}
		}},
		{"metastable", capMetastable, analyzer.StatusFail, func(v *analyzer.CheckResult, l *analyzer.LoadSeries) []string {
			return []string{"never recovered in " + fmtDur(time.Duration(l.Recovery.Observed)) + ": metastable", "queue limit 100"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Collect(bytes.NewReader(tt.synth.write(t)), Options{})
			if err != nil {
				t.Fatal(err)
			}
			v := c.Verdict().Check(analyzer.CheckRecovery)
			l := c.an.Load()
			if v.Status != tt.status {
				t.Fatalf("recovery = %s (%s); want %s", v.Status, v.Reason, tt.status)
			}
			if l.Recovery.Recovered && math.Abs(l.Recovery.Time.Seconds()-v.Figure) > 1e-9 {
				t.Errorf("the plot's recovery %v, the verdict's %.3fs", l.Recovery.Time, v.Figure)
			}
			d := c.plotCapacity()
			if d.p == nil {
				t.Fatalf("not drawn: %s", d.Note)
			}
			text := drawnText(t, d)
			var firsts int64
			for _, n := range l.First {
				firsts += n
			}
			for _, w := range append(tt.legend(v, l), "offered: first attempts ("+fmtCount(firsts)+")") {
				if !strings.Contains(text, w) {
					t.Errorf("plot text lacks %q:\n%s", w, text)
				}
			}
			if st := c.Stats(); st.Attempts == 0 {
				t.Error("no attempts")
			}
		})
	}
}

// TestCapacityPlotPanels: the two panels share one time axis — their data
// areas start and end at the same x, only the lower one labels it — the
// legends sit right of both, and no axis labels ticks with needless
// decimals.
func TestCapacityPlotPanels(t *testing.T) {
	c, err := Collect(bytes.NewReader(capMetastable.write(t)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := c.plotCapacity()
	s, ok := d.p.(*stacked)
	if !ok {
		t.Fatalf("capacity plot is a %T; want two stacked panels", d.p)
	}
	cv := draw.New(vgimg.New(d.w, d.h))
	topC, botC, lw := s.layout(cv)
	td, bd := s.topPlot.DataCanvas(topC), s.bottomPlot.DataCanvas(botC)
	if math.Abs(float64(td.Min.X-bd.Min.X)) > 0.01 || math.Abs(float64(td.Max.X-bd.Max.X)) > 0.01 {
		t.Errorf("data areas x [%v, %v] and [%v, %v]; want one time axis", td.Min.X, td.Max.X, bd.Min.X, bd.Max.X)
	}
	if s.topPlot.X.Min != s.bottomPlot.X.Min || s.topPlot.X.Max != s.bottomPlot.X.Max {
		t.Errorf("x ranges [%v, %v] and [%v, %v]; want one", s.topPlot.X.Min, s.topPlot.X.Max, s.bottomPlot.X.Min, s.bottomPlot.X.Max)
	}
	if edge := cv.Max.X - lw; td.Max.X > edge || bd.Max.X > edge {
		t.Errorf("a data area ends past the legend strip at %v", edge)
	}
	if ls := labels(s.topPlot.X); len(ls) != 0 {
		t.Errorf("the upper panel labels its time axis %v; want it left to the lower one", ls)
	}
	for _, p := range []*plot.Plot{s.topPlot, s.bottomPlot} {
		for _, a := range []plot.Axis{p.Y, s.bottomPlot.X} {
			if why := needlessDecimals(labels(a)); why != "" {
				t.Errorf("%s: %s", a.Label.Text, why)
			}
		}
	}
}

// TestCapacityPlotOnlyWithCapacity: a timeline without meta.capacity has
// no capacity plot at all.
func TestCapacityPlotOnlyWithCapacity(t *testing.T) {
	data := capRecovers.records()
	data[0].Meta.Capacity = nil
	c := collect(data[0].Meta, Options{}, data[1:]...)
	for _, d := range c.plots() {
		if d.Name == PlotCapacity {
			t.Error("a capacity plot for a meta without capacity")
		}
	}
	if nc := collect(capRecovers.meta(), Options{}); nc.plotCapacity().Note == "" {
		t.Error("an empty run's capacity plot has no note saying why it is missing")
	}
}
