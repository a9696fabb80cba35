package analyzer

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// metastableSim is the shape of the metastable scenario, small: a
// stub of 10 workers × 50 ms (200 requests/s) with a queue of 100 (half a
// second of work), an open-loop fleet at 80 % of that, a trigger that
// drops the workers to 30 % for 5 s at 10 s, per-attempt timeouts of
// 250 ms (shorter than the queueing delay under overload), and 40 s of
// arrivals after the trigger. client sets the retry policy.
func metastableSim(seed uint64, client func(*capSim)) capSim {
	s := capSim{seed: seed, rate: 160, duration: 55 * s1, workers: 10, queue: 100, service: 50 * ms, exp: true,
		phases: triggerPhases(10*s1, 5*s1, 0.3), timeout: 250 * ms, maxAttempts: 1}
	if client != nil {
		client(&s)
	}
	return s
}

// The clients of the capacity tests.
var (
	noRetry  = func(s *capSim) { s.maxAttempts = 1 }
	jitter5  = func(s *capSim) { s.maxAttempts = 5; s.backoff = capJitter(100*ms, 2*s1) }
	budget10 = func(s *capSim) {
		s.maxAttempts, s.backoff, s.budget, s.budgetCap = 5, capJitter(100*ms, 2*s1), 0.1, 10
	}
)

// longQueue: a queue of 1,000 (5 s of work) and a trigger of 8 s, which
// leaves a backlog of 800 requests that drains at the 40 requests/s the
// fleet leaves spare: every request waits past its timeout for ~18 s.
func longQueue(s *capSim) {
	s.queue = 1000
	s.phases = triggerPhases(10*s1, 8*s1, 0.3)
}

// TestRecovery: a system that recovers at once passes; one whose long
// FIFO queue takes longer than the threshold to drain fails with the time
// it took; one whose retries keep it overloaded fails as metastable.
func TestRecovery(t *testing.T) {
	tests := []struct {
		name       string
		sim        capSim
		opts       Options
		want       string
		recovered  bool
		minF, maxF float64 // the figure's range, s
	}{
		{"no retries: recovers quickly", metastableSim(1, noRetry), Options{}, StatusPass, true, 0, 3},
		{"a retry budget: recovers quickly", metastableSim(1, budget10), Options{}, StatusPass, true, 0, 5},
		{"a long FIFO queue: recovers slowly", metastableSim(1, longQueue), Options{}, StatusFail, true, 12, 25},
		{"the same with a threshold of 30 s", metastableSim(1, longQueue),
			Options{Checks: []CheckSpec{mustSpec(t, "recovery:threshold=30")}}, StatusPass, true, 10, 25},
		{"5 attempts, no budget: never recovers", metastableSim(1, jitter5), Options{}, StatusFail, false, 35, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, l := tt.sim.verdict(tt.opts)
			c := v.Check(CheckRecovery)
			if c.Status != tt.want || c.Figure < tt.minF || c.Figure > tt.maxF {
				t.Errorf("recovery = %s %.2fs (threshold %.0fs: %s); want %s within [%g, %g]", c.Status, c.Figure, c.Threshold, c.Reason, tt.want, tt.minF, tt.maxF)
			}
			if l.Recovery.Recovered != tt.recovered || l.Recovery.Metastable == tt.recovered {
				t.Errorf("Load().Recovery = %+v; want recovered %v, metastable %v", l.Recovery, tt.recovered, !tt.recovered)
			}
			if metastable := strings.Contains(c.Reason, "metastable"); metastable == tt.recovered {
				t.Errorf("reason %q; want it to say metastable: %v", c.Reason, !tt.recovered)
			}
			if c.Status == StatusFail && len(c.Examples) == 0 {
				t.Error("failed without examples")
			}
			if tt.recovered && time.Duration(c.Figure*1e9).Round(ms) != l.Recovery.Time.Round(ms) {
				t.Errorf("figure %.3fs; Load says %v: one judgement, two answers", c.Figure, l.Recovery.Time)
			}
			if v.Status == VerdictInconclusive {
				t.Errorf("verdict INCONCLUSIVE: %v", v.Inconclusive)
			}
		})
	}
}

// handMeta is a stub of 10 workers × 50 ms, queue 100, with phases.
func handMeta(phases ...timeline.Phase) *timeline.Meta {
	return &timeline.Meta{Format: timeline.Format, Recorder: "run", Scenario: "hand", Phases: phases,
		Capacity: &timeline.Capacity{Concurrency: 10, Queue: 100, Service: int64(50 * ms)}}
}

// handRun is a timeline built by hand: a first attempt every `every` over
// [from, to), answered 200 after 50 ms of service when ok(at), else
// rejected with the queue full and retried `retries` times 100 ms apart,
// every retry rejected too. Records are in the order of their responses.
func handRun(meta *timeline.Meta, from, to, every time.Duration, retries int, ok func(at time.Duration) bool) []timeline.Record {
	var atts []timeline.Attempt
	n := 0
	for at := from; at < to; at += every {
		c := strconv.Itoa(n)
		n++
		base := timeline.Attempt{Client: c, Key: c + "/0", Method: "GET", Path: "/c/" + c + "/r/0"}
		a := base
		a.Attempt, a.At = 1, int64(at)
		if ok(at) {
			a.Done, a.Status, a.Service = int64(at+50*ms), 200, int64(50*ms)
			atts = append(atts, a)
			continue
		}
		for k := 0; k <= retries; k++ {
			r := base
			r.Attempt, r.At = k+1, int64(at+time.Duration(k)*100*ms)
			r.Done, r.Status, r.Limit = r.At+int64(ms), 503, LimitCapacity
			atts = append(atts, r)
		}
	}
	slices.SortStableFunc(atts, func(x, y timeline.Attempt) int { return int(min(max(x.Done-y.Done, -1), 1)) })
	recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: meta}}
	for _, a := range atts {
		recs = append(recs, timeline.Record{Type: timeline.TypeAttempt, Attempt: a})
	}
	end := atts[len(atts)-1].Done
	return append(recs, timeline.Record{Type: timeline.TypeEnd, End: &timeline.End{At: end, Reason: timeline.EndCompleted}})
}

func judgeRecords(recs []timeline.Record, opts Options) (*Verdict, *Analyzer) {
	an := New(recs[0].Meta, opts)
	for i := 1; i < len(recs); i++ {
		an.Add(&recs[i])
	}
	return an.Result(), an
}

// TestCapacitySkips: each capacity check skips, with its reason, when it
// has nothing to judge; a recovery that could not be judged on a stub
// with a trigger makes the verdict INCONCLUSIVE (the check is required
// there), unless it was skipped on purpose.
func TestCapacitySkips(t *testing.T) {
	trig := func(from, to time.Duration) []timeline.Phase { return triggerPhases(from, to-from, 0.3) }
	never := func(time.Duration) bool { return false }
	always := func(time.Duration) bool { return true }
	outside := func(from, to time.Duration) func(time.Duration) bool {
		return func(at time.Duration) bool { return at < from || at >= to }
	}
	noCap := handMeta(trig(10*s1, 15*s1)...)
	noCap.Capacity = nil
	tests := []struct {
		name         string
		recs         []timeline.Record
		opts         Options
		want         map[string]string // check → the reason's words (status skip), or "judged"
		inconclusive bool
	}{
		{"no capacity model", handRun(noCap, 0, 40*s1, 10*ms, 0, outside(10*s1, 15*s1)), Options{},
			map[string]string{CheckRecovery: "no finite capacity", CheckLoadAmplification: "no finite capacity", CheckWastedWork: "no finite capacity"}, false},
		{"no trigger", handRun(handMeta(timeline.Phase{Name: "all", Respond: "ok"}), 0, 40*s1, 10*ms, 0, always), Options{},
			map[string]string{CheckRecovery: "no trigger", CheckLoadAmplification: "no trigger", CheckWastedWork: "judged"}, false},
		{"a trigger until the end", handRun(handMeta(timeline.Phase{Name: "steady", End: int64(10 * s1), Respond: "ok"}, timeline.Phase{Name: "trigger", Start: int64(10 * s1), Respond: "ok", Capacity: 0.3}),
			0, 40*s1, 10*ms, 1, outside(10*s1, time.Hour)), Options{},
			map[string]string{CheckRecovery: "until the run ends", CheckLoadAmplification: "judged"}, true},
		{"no traffic after the trigger", handRun(handMeta(trig(10*s1, 15*s1)...), 0, 12*s1, 10*ms, 1, outside(10*s1, 15*s1)), Options{},
			map[string]string{CheckRecovery: "no first attempt arrived after the trigger ended at 15.000s", CheckLoadAmplification: "judged"}, true},
		{"the run ended too soon", handRun(handMeta(trig(10*s1, 15*s1)...), 0, 18*s1, 10*ms, 1, outside(10*s1, time.Hour)), Options{},
			map[string]string{CheckRecovery: "judging needs 20.000s of it (the 10.000s threshold plus the 10.000s hold)", CheckLoadAmplification: "judged"}, true},
		{"the run ended too soon, recovery skipped", handRun(handMeta(trig(10*s1, 15*s1)...), 0, 18*s1, 10*ms, 1, outside(10*s1, time.Hour)),
			Options{Skip: []string{CheckRecovery}}, map[string]string{CheckRecovery: "skipped by --skip"}, false},
		{"overloaded before the trigger", handRun(handMeta(trig(10*s1, 15*s1)...), 0, 40*s1, 10*ms, 1, func(at time.Duration) bool { return at%(20*ms) == 0 }), Options{},
			map[string]string{CheckRecovery: "not keeping up before the trigger: goodput 50%", CheckLoadAmplification: "judged"}, true},
		{"every request rejected", handRun(handMeta(trig(10*s1, 15*s1)...), 0, 40*s1, 10*ms, 0, never), Options{},
			map[string]string{CheckWastedWork: "no attempt records a service time"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := judgeRecords(tt.recs, tt.opts)
			for id, words := range tt.want {
				c := v.Check(id)
				switch {
				case words == "judged" && c.Status == StatusSkip:
					t.Errorf("%s skipped (%s); want it judged", id, c.Reason)
				case words != "judged" && (c.Status != StatusSkip || !strings.Contains(c.Reason, words)):
					t.Errorf("%s = %s (%s); want skip saying %q", id, c.Status, c.Reason, words)
				}
			}
			inc := slices.ContainsFunc(v.Inconclusive, func(s string) bool { return strings.Contains(s, "required check recovery") })
			if inc != tt.inconclusive {
				t.Errorf("inconclusive for recovery = %v (%v); want %v", inc, v.Inconclusive, tt.inconclusive)
			}
		})
	}
}

// TestLoadAmplification: attempts per first attempt from the trigger on,
// exact on a timeline built by hand; with and without retries, and with a
// retry budget, in the simulated fleet.
func TestLoadAmplification(t *testing.T) {
	t.Run("by hand", func(t *testing.T) {
		// Every request during the trigger is rejected and retried twice;
		// after it every one succeeds at once: 3 attempts per first
		// attempt during, none after (recovered at once).
		recs := handRun(handMeta(triggerPhases(10*s1, 5*s1, 0.3)...), 0, 40*s1, 10*ms, 2, func(at time.Duration) bool { return at < 10*s1 || at >= 15*s1 })
		v, _ := judgeRecords(recs, Options{})
		c := v.Check(CheckLoadAmplification)
		// The retries of the last 200 ms of the trigger arrive after it, when
		// the server had already recovered: 1470 attempts in the trigger.
		if c.Status != StatusFail || math.Abs(c.Figure-2.94) > 1e-9 || c.Samples != 500 {
			t.Errorf("load-amplification = %s %.3f over %d (%s); want fail 2.94 over the trigger's 500 first attempts", c.Status, c.Figure, c.Samples, c.Reason)
		}
		for _, w := range []string{"during the trigger: mean 2.94×", "after it: none (recovered at once)", "1470 rejected with the queue full"} {
			if !strings.Contains(c.Reason, w) {
				t.Errorf("reason %q lacks %q", c.Reason, w)
			}
		}
		if r := v.Check(CheckRecovery); r.Status != StatusPass || r.Figure != 0 {
			t.Errorf("recovery = %s %.2f (%s); want pass 0", r.Status, r.Figure, r.Reason)
		}
	})
	for _, tt := range []struct {
		name     string
		client   func(*capSim)
		want     string
		min, max float64
	}{
		{"no retries", noRetry, StatusPass, 1, 1},
		{"a 10% retry budget", budget10, StatusPass, 1.05, 1.15},
		{"5 attempts, no budget", jitter5, StatusFail, 4, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := metastableSim(2, tt.client).verdict(Options{})
			c := v.Check(CheckLoadAmplification)
			if c.Status != tt.want || c.Figure < tt.min || c.Figure > tt.max {
				t.Errorf("load-amplification = %s %.3f (%s); want %s within [%g, %g]", c.Status, c.Figure, c.Reason, tt.want, tt.min, tt.max)
			}
		})
	}
}

// TestWastedWork: service given to attempts whose client had gone is
// wasted; with cancel_on_disconnect a queued one is dropped unserved
// (service 0) and wastes nothing.
func TestWastedWork(t *testing.T) {
	build := func(cancel bool) []timeline.Record {
		m := handMeta(timeline.Phase{Name: "all", Respond: "ok"})
		m.Capacity.CancelOnDisconnect = cancel
		recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: m}}
		for i := range 10 {
			at := int64(i) * int64(100*ms)
			a := timeline.Attempt{Client: strconv.Itoa(i), Key: strconv.Itoa(i) + "/0", Attempt: 1, Method: "GET", At: at, Status: 200}
			if i%2 == 0 { // served for a client still waiting
				a.Done, a.Service = at+int64(50*ms), int64(50*ms)
			} else { // its client left after 300 ms in the queue
				a.Fault, a.Queue, a.Done = timeline.FaultAbandoned, int64(300*ms), at+int64(300*ms)
				if !cancel {
					a.Done, a.Service = a.Done+int64(50*ms), int64(50*ms)
				}
			}
			recs = append(recs, timeline.Record{Type: timeline.TypeAttempt, Attempt: a})
		}
		return recs
	}
	for _, tt := range []struct {
		cancel bool
		want   string
		figure float64
	}{{false, StatusPass, 50}, {true, StatusPass, 0}} {
		v, _ := judgeRecords(build(tt.cancel), Options{})
		if c := v.Check(CheckWastedWork); c.Status != tt.want || c.Figure != tt.figure {
			t.Errorf("cancel %v: wasted-work = %s %.1f%% (%s); want %s %.0f%%", tt.cancel, c.Status, c.Figure, c.Reason, tt.want, tt.figure)
		}
	}
	v, _ := judgeRecords(build(false), Options{Checks: []CheckSpec{mustSpec(t, "wasted-work:threshold=40")}})
	if c := v.Check(CheckWastedWork); c.Status != StatusFail || len(c.Examples) == 0 {
		t.Errorf("wasted-work with a 40%% threshold = %s (%s); want fail with an example", c.Status, c.Reason)
	}
	// The simulated storm: served for nothing, most of the run's work.
	for _, tt := range []struct {
		name   string
		client func(*capSim)
		want   string
	}{{"no retries", noRetry, StatusPass}, {"5 attempts, no budget", jitter5, StatusFail}} {
		v, _ := metastableSim(3, tt.client).verdict(Options{})
		if c := v.Check(CheckWastedWork); c.Status != tt.want {
			t.Errorf("%s: wasted-work = %s %.1f%% (%s); want %s", tt.name, c.Status, c.Figure, c.Reason, tt.want)
		}
	}
}

// TestLoadSeries: what Load reports: counts by bin, goodput at the
// successful attempt's arrival, the mean queue from the queueing times,
// and every count kept when a late record folds the axis.
func TestLoadSeries(t *testing.T) {
	meta := handMeta(timeline.Phase{Name: "all", Respond: "ok"})
	meta.Duration = int64(4096 * 10 * ms) // 10 ms bins
	an := New(meta, Options{})
	add := func(a timeline.Attempt) { an.Add(&timeline.Record{Type: timeline.TypeAttempt, Attempt: a}) }
	// Waiting over [0.5 s, 2.5 s), [1.0 s, 1.2 s) and [2.995 s, 3 s);
	// served after.
	add(timeline.Attempt{Client: "1", Key: "1/0", Attempt: 1, At: int64(500 * ms), Queue: int64(2 * s1), Service: int64(50 * ms), Done: int64(2550 * ms), Status: 200})
	add(timeline.Attempt{Client: "2", Key: "2/0", Attempt: 1, At: int64(s1), Queue: int64(200 * ms), Service: int64(50 * ms), Done: int64(1250 * ms), Status: 200, Fault: timeline.FaultAbandoned})
	add(timeline.Attempt{Client: "2", Key: "2/0", Attempt: 2, At: int64(1300 * ms), Done: int64(1301 * ms), Status: 503, Limit: LimitCapacity})
	add(timeline.Attempt{Client: "4", Key: "4/0", Attempt: 1, At: int64(2995 * ms), Queue: int64(5 * ms), Service: int64(50 * ms), Done: int64(3050 * ms), Status: 200})
	l := an.Load()
	if l.Width != int64(10*ms) {
		t.Fatalf("width %v; want 10ms", time.Duration(l.Width))
	}
	mean := func(from, to time.Duration) float64 {
		var s float64
		for i := int(int64(from) / l.Width); i < int(int64(to)/l.Width) && i < len(l.Queue); i++ {
			s += l.Queue[i]
		}
		return s / float64(int64(to-from)/l.Width)
	}
	for _, q := range []struct {
		from, to time.Duration
		want     float64
	}{{0, 500 * ms, 0}, {500 * ms, s1, 1}, {s1, 1200 * ms, 2}, {1200 * ms, 2500 * ms, 1}, {2500 * ms, 2990 * ms, 0}, {2990 * ms, 3 * s1, 0.5}, {3 * s1, 4 * s1, 0}} {
		if got := mean(q.from, q.to); math.Abs(got-q.want) > 1e-9 {
			t.Errorf("mean queue over [%v, %v) = %v; want %v", q.from, q.to, got, q.want)
		}
	}
	sum := func(s []int64) (n int64) {
		for _, x := range s {
			n += x
		}
		return n
	}
	if sum(l.First) != 3 || sum(l.Attempts) != 4 || sum(l.Good) != 2 || sum(l.Rejected) != 1 || l.Good[50] != 1 {
		t.Errorf("first %d, attempts %d, good %d (at 500ms: %d), rejected %d; want 3, 4, 2 (1), 1", sum(l.First), sum(l.Attempts), sum(l.Good), l.Good[50], sum(l.Rejected))
	}
	// An attempt far beyond the axis folds it: nothing is lost, the
	// queue's time integral stays, memory does not grow.
	add(timeline.Attempt{Client: "3", Key: "3/0", Attempt: 1, At: int64(1000 * s1), Queue: int64(s1), Done: int64(1001 * s1), Status: 200, Service: int64(ms)})
	l = an.Load()
	var area float64
	for _, q := range l.Queue {
		area += q * float64(l.Width)
	}
	if sum(l.First) != 4 || sum(l.Good) != 3 || len(an.load.first) != loadBinCount || math.Abs(area-float64(3205*ms)) > 1 {
		t.Errorf("after folding to %v bins: first %d, good %d, %d bins, queue area %v; want 4, 3, %d, 3.205s",
			time.Duration(l.Width), sum(l.First), sum(l.Good), len(an.load.first), time.Duration(area), loadBinCount)
	}
	if New(&timeline.Meta{Recorder: "run"}, Options{}).Load() != nil {
		t.Error("Load() without a capacity model is not nil")
	}
}

func TestCapacityRate(t *testing.T) {
	c := &timeline.Capacity{Concurrency: 10, Service: int64(50 * ms)}
	for _, tt := range []struct {
		share, want float64
	}{{0, 200}, {1, 200}, {0.3, 60}, {1.5, 200}} {
		if got := CapacityRate(c, tt.share); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("CapacityRate(10 × 50ms, %v) = %v; want %v", tt.share, got, tt.want)
		}
	}
	if CapacityRate(nil, 1) != 0 || CapacityRate(&timeline.Capacity{Concurrency: 3}, 1) != 0 {
		t.Error("CapacityRate without a capacity or a service time is not 0")
	}
}

func TestTriggerSpans(t *testing.T) {
	m := handMeta(
		timeline.Phase{Name: "a", End: 5, Respond: "ok"},
		timeline.Phase{Name: "b", Start: 5, End: 7, Respond: "ok", Capacity: 0.5},
		timeline.Phase{Name: "c", Start: 7, End: 9, Respond: "ok", Capacity: 0.2},
		timeline.Phase{Name: "d", Start: 9, End: 12, Respond: "ok", Capacity: 1},
		timeline.Phase{Name: "e", Start: 12, Respond: "ok", Capacity: 0.3},
	)
	if got, want := TriggerSpans(m), []Span{{5, 9}, {12, 0}}; !slices.Equal(got, want) {
		t.Errorf("TriggerSpans = %v; want %v", got, want)
	}
	m.Capacity = nil
	if TriggerSpans(m) != nil {
		t.Error("trigger spans without a capacity model")
	}
}

// TestCapacityWindow: the rolling window holds 200 first attempts at the
// run's mean offered load, at least 1 s and at most 10 s; the hold is 5
// windows, at least 5 s; both can be set.
func TestCapacityWindow(t *testing.T) {
	for _, tt := range []struct {
		every        time.Duration
		opts         Options
		window, hold time.Duration
	}{
		{4 * ms, Options{}, s1, 5 * s1},
		{25 * ms, Options{}, 5 * s1, 25 * s1},
		{100 * ms, Options{}, 10 * s1, 50 * s1},
		{4 * ms, Options{Checks: []CheckSpec{mustSpec(t, "recovery:window=2s,hold=3s")}}, 2 * s1, 3 * s1},
	} {
		m := handMeta(triggerPhases(10*s1, 5*s1, 0.3)...)
		m.Duration = int64(205 * s1) // 50 ms bins
		recs := handRun(m, 0, min(200*s1, 10000*tt.every), tt.every, 0, func(time.Duration) bool { return true })
		_, an := judgeRecords(recs, tt.opts)
		l := an.Load()
		if time.Duration(l.Window) != tt.window || time.Duration(l.Recovery.Hold) != tt.hold {
			t.Errorf("a first attempt every %v, %v: window %v, hold %v; want %v, %v", tt.every, tt.opts.Checks, time.Duration(l.Window), time.Duration(l.Recovery.Hold), tt.window, tt.hold)
		}
	}
}

// TestCapacityGrace: an attempt its client left waiting is recorded when
// the stub is done with it, after the outcome; the analyzer keeps the
// logical request long enough to pair it (no unordered-attempts warning
// in a retry storm), as long as a full queue takes to drain at the
// trigger's share plus ten service times.
func TestCapacityGrace(t *testing.T) {
	m := handMeta(triggerPhases(10*s1, 5*s1, 0.3)...)
	if got, want := time.Duration(capacityGrace(m)), 500*ms+100*50*ms/3+10*50*ms; got != want {
		t.Errorf("capacityGrace = %v; want %v", got, want)
	}
	if got := time.Duration(New(&timeline.Meta{Recorder: "run"}, Options{}).grace); got != 500*ms {
		t.Errorf("grace without a capacity model = %v; want 500ms", got)
	}
	v, _ := metastableSim(1, jitter5).verdict(Options{})
	for _, w := range v.Warnings {
		if w.ID == WarnUnordered {
			t.Errorf("warning %q in a retry storm whose records all came", w.Message)
		}
	}
}
