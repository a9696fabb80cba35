package noise

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// hist builds a runtime histogram over edges (seconds) with counts.
func hist(edges []float64, counts ...uint64) *metrics.Float64Histogram {
	return &metrics.Float64Histogram{Buckets: edges, Counts: counts}
}

var schedEdges = []float64{math.Inf(-1), 0, 1e-6, 1e-3, 0.5, math.Inf(1)}

// TestSchedDiff: the quantiles come from the counts added between the two
// reads (not from those before), read as bucket upper edges, the +Inf
// bucket as its lower edge, and Samples is the count added.
func TestSchedDiff(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after []uint64
		p50, p99, max int64
		samples       int64
	}{
		// 100 added: 60 in (0, 1µs], 39 in (1µs, 1ms], 1 in (1ms, 0.5s].
		// Counts before (10,000 in the 0.5s bucket) must not count.
		{"upper edges", []uint64{0, 5, 0, 10000, 0}, []uint64{0, 65, 39, 10001, 0}, 1000, 1000000, 500000000, 100},
		// p99 is the 99th of 100: in the 1 ms bucket; max the +Inf one,
		// read as its lower edge 0.5 s.
		{"inf bucket", []uint64{0, 0, 0, 0, 0}, []uint64{0, 0, 99, 0, 1}, 1000000, 1000000, 500000000, 100},
		// The -Inf..0 bucket reads as 0, never negative.
		{"underflow", []uint64{3, 0, 0, 0, 0}, []uint64{7, 0, 0, 0, 0}, 0, 0, 0, 4},
		// One sample: every quantile is its bucket.
		{"one", []uint64{1, 1, 1, 1, 1}, []uint64{1, 1, 2, 1, 1}, 1000000, 1000000, 1000000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := schedDiff(hist(schedEdges, tc.before...), hist(schedEdges, tc.after...))
			if !ok {
				t.Fatal("schedDiff: not ok")
			}
			if s.name != timeline.NoiseSched || s.p50 != tc.p50 || s.p99 != tc.p99 || s.max != tc.max || s.samples != tc.samples {
				t.Errorf("got %s p50 %d p99 %d max %d samples %d; want p50 %d p99 %d max %d samples %d",
					s.name, s.p50, s.p99, s.max, s.samples, tc.p50, tc.p99, tc.max, tc.samples)
			}
		})
	}
}

// TestSchedDiffNothing: no new count, or histograms of other shapes, give
// no source.
func TestSchedDiffNothing(t *testing.T) {
	same := []uint64{1, 2, 3, 4, 5}
	if _, ok := schedDiff(hist(schedEdges, same...), hist(schedEdges, same...)); ok {
		t.Error("no new count: ok")
	}
	if _, ok := schedDiff(hist(schedEdges, 1, 2, 3), hist(schedEdges, 1, 2, 3, 4, 5)); ok {
		t.Error("different bucket counts: ok")
	}
	if _, ok := schedDiff(hist(schedEdges[:4], 1, 2, 3, 4, 5), hist(schedEdges[:4], 1, 2, 3, 4, 6)); ok {
		t.Error("edges that do not fit the counts: ok")
	}
}

// TestReadSched: the runtime has the metric and its last edge is +Inf,
// which schedDiff reads as the lower edge.
func TestReadSched(t *testing.T) {
	h := readSched()
	if h == nil {
		t.Fatal("no " + schedMetric)
	}
	if len(h.Buckets) != len(h.Counts)+1 || !math.IsInf(h.Buckets[len(h.Buckets)-1], 1) {
		t.Errorf("%d edges for %d counts, last %v", len(h.Buckets), len(h.Counts), h.Buckets[len(h.Buckets)-1])
	}
}

func TestParsePSI(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"some avg10=36.80 avg60=18.47 avg300=14.51 total=88774573\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 88774573, true},
		{"full avg10=0.00 avg60=0.00 avg300=0.00 total=5\nsome avg10=1.00 avg60=0.00 avg300=0.00 total=7", 7, true}, // order, no final newline
		{"some total=0\n", 0, true},
		{"", 0, false},
		{"full avg10=0.00 total=5\n", 0, false},                // no some line
		{"some avg10=0.00 avg60=0.00 avg300=0.00\n", 0, false}, // no total
		{"some avg10=0.00 total=-4\n", 0, false},               // negative
		{"some avg10=0.00 total=12x\n", 0, false},              // not a number
		{"some total=99999999999999999999999\n", 0, false},     // overflow
		{"somewhat total=5\nsome total=6\n", 6, true},          // "somewhat" is not "some"
		{"some total=\n", 0, false},                            // empty
	} {
		got, ok := parsePSI([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parsePSI(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzPSI: the parser never panics, never returns a negative total, and
// reads back a total it is given in a well-formed some line.
func FuzzPSI(f *testing.F) {
	f.Add([]byte("some avg10=36.80 avg60=18.47 avg300=14.51 total=88774573\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	f.Add([]byte("some total=1"))
	f.Add([]byte("full total=1\n\x00some\ttotal=2"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := parsePSI(b)
		if n < 0 || (!ok && n != 0) {
			t.Fatalf("parsePSI(%q) = %d, %v", b, n, ok)
		}
		if ok {
			line := "some avg10=0.00 total=" + strconv.FormatInt(n, 10) + "\n"
			if m, ok2 := parsePSI([]byte(line)); !ok2 || m != n {
				t.Fatalf("round trip of %d: %d, %v", n, m, ok2)
			}
		}
	})
}

func TestPressure(t *testing.T) {
	for _, tc := range []struct {
		before, after int64
		wall          time.Duration
		want          float64
	}{
		{1000, 251000, time.Second, 25},
		{0, 0, time.Second, 0},
		{-1, 5000, time.Second, 0},      // unknown at Start
		{5000, 4000, time.Second, 0},    // went back
		{0, 5000000, time.Second, 100},  // more than the wall: capped
		{0, 5, 0, 0},                    // no time passed
		{0, 5, time.Nanosecond * 10, 0}, // below a µs
	} {
		if got := pressure(tc.before, tc.after, tc.wall); got != tc.want {
			t.Errorf("pressure(%d, %d, %v) = %v; want %v", tc.before, tc.after, tc.wall, got, tc.want)
		}
	}
}

// TestCombine: the largest at each quantile, the samples summed, the names
// in order.
func TestCombine(t *testing.T) {
	n := combine([]source{
		{name: timeline.NoiseSched, p50: 10, p90: 900, p99: 5000, max: 9000, samples: 40},
		{name: timeline.NoiseSleep, p50: 70, p90: 100, p99: 300, max: 20000, samples: 500},
		{name: timeline.NoiseProbe, p50: 60, p90: 1000, p99: 4000, max: 8000, samples: 499},
	})
	want := timeline.Noise{Source: "sched+sleep+probe", P50: 70, P90: 1000, P99: 5000, Max: 20000, Samples: 1039}
	if *n != want {
		t.Errorf("combine = %+v; want %+v", *n, want)
	}
	if n := combine(nil); *n != (timeline.Noise{}) {
		t.Errorf("combine(nil) = %+v; want zero", *n)
	}
}

func TestParseProbe(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"ready\n{\"samples\":5,\"p50\":1,\"p90\":2,\"p99\":2,\"max\":3}\n", true},
		{"ready\n{\"samples\":5,\"p50\":1,\"p90\":3,\"p99\":2,\"max\":3}\n", false}, // p90 above p99
		{"{\"samples\":5,\"p50\":1,\"p99\":2,\"max\":3}\n", false},                  // no ready line
		{"ready\n{\"samples\":0,\"p50\":0,\"p99\":0,\"max\":0}\n", false},           // no sample
		{"ready\n{\"samples\":5,\"p50\":3,\"p99\":2,\"max\":3}\n", false},           // out of order
		{"ready\n{\"samples\":5,\"p50\":-1,\"p99\":2,\"max\":3}\n", false},
		{"ready\n{\"samples\":5,\"p50\":1,\"p99\":4,\"max\":3}\n", false},
		{"ready\n", false},
		{"ready\n{\"samples\":5", false},
	} {
		s, ok := parseProbe([]byte(tc.in))
		if ok != tc.ok {
			t.Errorf("parseProbe(%q): ok %v; want %v", tc.in, ok, tc.ok)
		}
		if ok && (s.name != timeline.NoiseProbe || s.samples != 5 || s.p50 != 1 || s.p90 != 2 || s.p99 != 2 || s.max != 3) {
			t.Errorf("parseProbe(%q) = %+v", tc.in, s)
		}
	}
}

// FuzzProbeReport: a probe's output never panics the parser, and what it
// accepts is ordered and has samples.
func FuzzProbeReport(f *testing.F) {
	f.Add([]byte("ready\n{\"samples\":5,\"p50\":1,\"p99\":2,\"max\":3}\n"))
	f.Add([]byte("ready\n{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok := parseProbe(b)
		if ok && (s.samples <= 0 || s.p50 < 0 || s.p50 > s.p90 || s.p90 > s.p99 || s.p99 > s.max) {
			t.Fatalf("parseProbe(%q) = %+v", b, s)
		}
	})
}

// TestRunProbe: the probe loop says it is ready after its first wake-up
// and, once stopped, reports what it measured in a form parseProbe reads.
func TestRunProbe(t *testing.T) {
	ready := make(chan struct{})
	out := &capped{max: 4 << 10, ready: ready}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- runProbe(time.Millisecond, stop, out) }()
	waitFor(t, ready, "the probe's ready line")
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, ok := parseProbe(out.bytes())
	if !ok || s.samples < 1 {
		t.Fatalf("parseProbe(%q) = %+v, %v", out.bytes(), s, ok)
	}
}

// TestProbeNoReport: a probe that exits without a report, or does not
// stop when asked, gives no source (and the second is killed).
func TestProbeNoReport(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses cat and sleep")
	}
	for _, tc := range []struct {
		name string
		args []string
		wait time.Duration
	}{
		{"exits silent", []string{"sh", "-c", "cat >/dev/null", "sh"}, time.Minute}, // ends at stdin's end
		{"hangs", []string{"sleep", "30"}, 0},                                       // killed at once
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, err := exec.LookPath(tc.args[0])
			if err != nil {
				t.Skip(err)
			}
			p, err := newProbe(append([]string{path}, tc.args[1:]...), time.Millisecond, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s := p.stop(tc.wait); s != nil {
				t.Errorf("stop = %+v; want nil", *s)
			}
			if p.cmd.ProcessState == nil {
				t.Error("the process was not waited for")
			}
		})
	}
}

// TestMeter: a meter started with a probe reports all three sources, with
// samples and ordered quantiles; the probe is this test binary run again
// (TestMain).
func TestMeter(t *testing.T) {
	reached, ready := make(chan struct{}), make(chan struct{})
	m := start(Options{Period: time.Millisecond, Probe: probeCommand(t)}, hooks{sleepWant: 40, sleepReached: reached, probeReady: ready})
	waitFor(t, reached, "40 wake-ups of the sleep loop")
	waitFor(t, ready, "the probe's ready line")
	pingPong(200)
	n := m.Stop()
	if n == nil {
		t.Fatal("Stop: nil")
	}
	t.Logf("noise: %+v", *n)
	if n.Source != "sched+sleep+probe" {
		t.Errorf("Source %q; want sched+sleep+probe", n.Source)
	}
	if n.Samples < 42 || n.P50 < 0 || n.P50 > n.P99 || n.P99 > n.Max {
		t.Errorf("samples %d, p50 %d, p99 %d, max %d: want more than 41 samples and 0 <= p50 <= p99 <= max", n.Samples, n.P50, n.P99, n.Max)
	}
	if n.CPUPressure < 0 || n.CPUPressure > 100 {
		t.Errorf("CPUPressure %v", n.CPUPressure)
	}
	if again := m.Stop(); again != n {
		t.Error("a second Stop measured again")
	}
	if (*Meter)(nil).Stop() != nil {
		t.Error("a nil Meter's Stop is not nil")
	}
}

// TestMeterNoProbe: without Options.Probe there is no probe source.
func TestMeterNoProbe(t *testing.T) {
	reached := make(chan struct{})
	m := start(Options{Period: time.Millisecond}, hooks{sleepWant: 40, sleepReached: reached})
	waitFor(t, reached, "40 wake-ups of the sleep loop")
	pingPong(200)
	// Peek measures so far and goes on: the loop keeps counting.
	p := m.Peek()
	if p == nil || p.Source != "sched+sleep" || p.Samples < 40 {
		t.Fatalf("Peek = %+v; want sched+sleep with 40 samples or more", p)
	}
	n := m.Stop()
	if n.Source != "sched+sleep" {
		t.Errorf("Source %q; want sched+sleep", n.Source)
	}
	if n.Samples < p.Samples {
		t.Errorf("Stop's %d samples, fewer than Peek's %d before it", n.Samples, p.Samples)
	}
	if m.Peek() != n {
		t.Error("Peek after Stop is not what Stop measured")
	}
	if (*Meter)(nil).Peek() != nil {
		t.Error("a nil Meter's Peek is not nil")
	}
}

// TestStartProbeLate: a probe started after the meter (serve's first
// loopback peer) reports at Stop; one asked for after Stop, or a second
// one, is not started.
func TestStartProbeLate(t *testing.T) {
	reached, ready := make(chan struct{}), make(chan struct{})
	m := start(Options{Period: time.Millisecond}, hooks{sleepWant: 5, sleepReached: reached, probeReady: ready})
	waitFor(t, reached, "5 wake-ups of the sleep loop")
	m.StartProbe(nil) // no command: nothing
	m.StartProbe(probeCommand(t))
	first := m.probe
	m.StartProbe(probeCommand(t))
	if first == nil || m.probe != first {
		t.Fatalf("probe %p then %p; want one probe, started once", first, m.probe)
	}
	waitFor(t, ready, "the probe's ready line")
	n := m.Stop()
	if n.Source != "sched+sleep+probe" && n.Source != "sleep+probe" {
		t.Errorf("Source %q; want the probe's source", n.Source)
	}
	m.StartProbe(probeCommand(t))
	if m.probe != first {
		t.Error("a probe started after Stop")
	}
}

// TestProbeMainArgs: a probe process given no period, or a bad one, exits
// with status 2 at once, writing nothing.
func TestProbeMainArgs(t *testing.T) {
	for _, args := range [][]string{nil, {"0s"}, {"-1ms"}, {"soon"}, {"1ms", "2ms"}} {
		var out bytes.Buffer
		if got := ProbeMain(args, strings.NewReader(""), &out); got != 2 || out.Len() != 0 {
			t.Errorf("ProbeMain(%q) = %d, wrote %q; want 2 and nothing", args, got, out.String())
		}
	}
}

// pingPong makes n goroutine wake-ups, which the runtime's scheduling
// latencies sample (one in eight).
func pingPong(n int) {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	for i := range n {
		ping <- i
		<-pong
	}
	close(ping)
}

// probeCommand is the command line of a probe: this test binary, which
// TestMain turns into one.
func probeCommand(t testing.TB) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	return []string{exe, ProbeArg}
}

// TestMain lets the test binary be a probe process (probeCommand).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ProbeArg {
		os.Exit(ProbeMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// waitFor waits for ch, failing the test after a minute (a hung loop).
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute", what)
	}
}

// TestRunProbeStoppedAtOnce: a probe stopped before its first wake-up
// still measures the nap under way and reports it, ready first.
func TestRunProbeStoppedAtOnce(t *testing.T) {
	var out bytes.Buffer
	stop := make(chan struct{})
	close(stop)
	if err := runProbe(time.Millisecond, stop, &out); err != nil {
		t.Fatal(err)
	}
	if s, ok := parseProbe(out.Bytes()); !ok || s.samples != 1 {
		t.Fatalf("parseProbe(%q) = %+v, %v; want the one nap", out.Bytes(), s, ok)
	}
}

// TestProbeWait: Stop waits longer for a probe still starting than for one
// that said it was ready.
func TestProbeWait(t *testing.T) {
	p := &probe{out: capped{max: 64}}
	if got := p.wait(); got != probeStartWait {
		t.Errorf("wait before the ready line = %v; want %v", got, probeStartWait)
	}
	p.out.Write([]byte(probeReady))
	if got := p.wait(); got != probeStartWait {
		t.Errorf("wait before the ready line's end = %v; want %v", got, probeStartWait)
	}
	p.out.Write([]byte("\n"))
	if got := p.wait(); got != probeWait {
		t.Errorf("wait after the ready line = %v; want %v", got, probeWait)
	}
}
