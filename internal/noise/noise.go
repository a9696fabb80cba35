// Package noise measures how late the host runs things while a real-time
// run runs, for the end record's timeline.Noise: Start a Meter when the
// run starts, Stop it when the fleet stops.
//
// A Meter combines up to four sources (timeline.NoiseSched, NoiseSleep,
// NoiseProbe, NoiseStamp) and Linux's CPU pressure:
//
//   - sched: the Go runtime's /sched/latencies:seconds histogram, read at
//     Start and at Stop; the difference is how long this process's
//     goroutines waited to run once ready during the run (the runtime
//     samples about one scheduling event in eight).
//   - sleep: a goroutine sleeps Period on a Go timer in a loop and records
//     how late each wake-up is. It sees what sched misses: the kernel
//     keeping the process off the CPU (other processes, CPU hogs), and how
//     late a timer fires, which is what a client goroutine's retry delay
//     is. It holds no Go processor while it sleeps (see onTimer).
//   - probe (Options.Probe, StartProbe): a separate process (ProbeMain)
//     whose thread sleeps Period in the kernel in a loop, so the
//     measurement is what another program's thread on this host sees:
//     for exec fleets, whose clients are child processes, and serve's
//     clients on this host.
//   - stamp (Options.Stamps): how long the stub's arrivals waited in
//     their sockets before it read them (Noise.SocketP90, SocketP99) and
//     how many late ones fell together (Noise.Batch); see Stamps. The
//     stub stamps each arrival at its receipt, so these waits are not in
//     the lateness quantiles: the source is named, with its samples, and
//     adds no lateness — except with Options.StampsLate (serve: clients
//     the meter cannot see) when no probe reported, where they stand for
//     the clients' lateness.
//   - CPU pressure: /proc/pressure/cpu "some" total over the run as a share
//     of wall time (0 where the kernel does not report it).
//
// A Meter must never be started inside a testing/synctest bubble: virtual
// time has no host noise, and its goroutine would sleep on the bubble's
// clock. A virtual run has no Meter and no Noise.
package noise

import (
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
	"github.com/retrylab/retrylab/timeline"
)

// DefaultPeriod is the sleep loops' period: 100 wake-ups a second, each
// an independent look at how late a sleeper wakes (3,000 over a 30 s
// run, 30 of them above the p99). A shorter period measures the same
// lateness more often, for more CPU (BenchmarkMeterCPU; what the meter
// costs the fleet: BenchmarkMeasures, in BENCHMARKS.md).
const DefaultPeriod = 10 * time.Millisecond

// Options configure a Meter.
type Options struct {
	// Period is the sleep loops' period (0: DefaultPeriod).
	Period time.Duration
	// Probe, when not empty, is the command line of a probe process
	// (the program and ProbeArg; the period is appended) that Start runs
	// beside the meter, for fleets of child processes. If the probe
	// cannot start or does not report, the Noise has no probe source; the
	// run goes on.
	Probe []string
	// Stamps, when not nil, is the stub's measurement of its arrivals'
	// stamps (NewStamps), joined as the stamp source and the Batch.
	Stamps *Stamps
	// StampsLate counts the stamps' socket waits as lateness too, unless
	// a probe reported: for a recording whose clients the meter cannot
	// see (serve's remote clients), how far behind the stub ran stands
	// for how far behind they may have.
	StampsLate bool
	// NoSleep runs the Meter without its sleep loop: only for a
	// benchmark of what the loop costs (BenchmarkMeasures in runner).
	NoSleep bool
}

// lateLayout buckets lateness in µs, within 1/32 of exact above 32 µs.
var lateLayout = loghist.Layout{Unit: int64(time.Microsecond), Bits: 5}

// Meter measures the host's lateness from Start to Stop. Its methods are
// safe for concurrent use; a nil Meter's Stop returns nil.
type Meter struct {
	once sync.Once
	mu   sync.Mutex // guards result for Peek, and the probe's start
	// result is what Stop measured; stopped is set when Stop begins (no
	// probe starts after it).
	result  *timeline.Noise
	stopped bool
	probe   *probe // nil without a probe, or when it did not start
	tried   bool   // a probe was started (or failed to)

	period     time.Duration
	probeReady chan struct{} // hooks.probeReady
	wall0      time.Time
	sched0     *metrics.Float64Histogram // nil when the runtime lacks the metric
	psi0       int64                     // µs; -1 when unknown
	sleep      *sleeper
	stamps     *Stamps
	// stampsLate: Options.StampsLate.
	stampsLate bool
}

// Start starts measuring. It returns at once: the sleep loop runs on its
// own goroutine, the probe in its own process.
func Start(opts Options) *Meter { return start(opts, hooks{}) }

// hooks let tests wait for samples instead of sleeping.
type hooks struct {
	sleepWant    uint64 // with sleepReached: close it after this many wake-ups
	sleepReached chan struct{}
	probeReady   chan struct{} // closed when the probe has its first sample
}

func start(opts Options, h hooks) *Meter {
	period := opts.Period
	if period <= 0 {
		period = DefaultPeriod
	}
	m := &Meter{period: period, probeReady: h.probeReady, wall0: time.Now(), sched0: readSched(), psi0: readPSI(), stamps: opts.Stamps, stampsLate: opts.StampsLate}
	if !opts.NoSleep {
		m.sleep = startSleeper(period, onTimer, h.sleepWant, h.sleepReached)
	}
	m.StartProbe(opts.Probe)
	return m
}

// StartProbe starts a probe process with the command line argv (see
// Options.Probe) unless the Meter has started one, or argv is empty, or
// Stop has begun: for a meter that learns late that processes on this
// host are its clients (serve, at its first loopback peer). The probe
// measures from its start to Stop.
func (m *Meter) StartProbe(argv []string) {
	if m == nil || len(argv) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tried || m.stopped {
		return
	}
	m.tried = true
	m.probe, _ = newProbe(argv, m.period, m.probeReady) // no probe: the in-process sources stand
}

// Stop ends the measurement and returns what it measured: the largest of
// the sources' lateness at each quantile, their sample counts summed, and
// the CPU pressure. It waits for the sleep loop's current period and for
// the probe's report (at most probeWait, or probeStartWait for a probe
// still starting). Later calls return the same.
func (m *Meter) Stop() *timeline.Noise {
	if m == nil {
		return nil
	}
	m.once.Do(func() {
		r := m.stop()
		m.mu.Lock()
		m.result = r
		m.mu.Unlock()
	})
	return m.result
}

// Peek is what the Meter has measured so far, the measurement going on:
// for a verdict on a recording that has not ended (serve's control API).
// The probe reports only when stopped, so a Peek has no probe source.
// After Stop it returns what Stop did.
func (m *Meter) Peek() *timeline.Noise {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	r := m.result
	m.mu.Unlock()
	if r != nil {
		return r
	}
	return m.measure(readSched(), readPSI(), time.Now(), m.sleep.peek(), nil)
}

func (m *Meter) stop() *timeline.Noise {
	sched1, psi1, wall1 := readSched(), readPSI(), time.Now()
	m.mu.Lock()
	m.stopped = true
	p := m.probe
	m.mu.Unlock()
	m.sleep.halt()
	var pr *source
	if p != nil {
		pr = p.stop(p.wait())
	}
	var sleep *loghist.Hist
	if m.sleep != nil {
		sleep = m.sleep.hist
	}
	return m.measure(sched1, psi1, wall1, sleep, pr)
}

// measure joins the sources read at wall1 (sched1, psi1, the sleep
// loop's sleep, the probe's pr when not nil) with the stamps.
func (m *Meter) measure(sched1 *metrics.Float64Histogram, psi1 int64, wall1 time.Time, sleep *loghist.Hist, pr *source) *timeline.Noise {

	var srcs []source
	if m.sched0 != nil && sched1 != nil {
		if s, ok := schedDiff(m.sched0, sched1); ok {
			srcs = append(srcs, s)
		}
	}
	if s, ok := histSource(timeline.NoiseSleep, sleep); ok {
		srcs = append(srcs, s)
	}
	if pr != nil {
		srcs = append(srcs, *pr)
	}
	st, batch, ok := m.stamps.source()
	if ok {
		// The arrivals are stamped at their receipts (see Stamps): the
		// waits are the stub's lateness, not the arrivals', unless they
		// stand for clients nothing else measured.
		if m.stampsLate && pr == nil {
			srcs = append(srcs, st)
		} else {
			srcs = append(srcs, source{name: st.name, samples: st.samples})
		}
	}
	n := combine(srcs)
	n.Batch = batch
	if ok {
		n.SocketP90, n.SocketP99 = st.p90, st.p99
	}
	n.CPUPressure = pressure(m.psi0, psi1, wall1.Sub(m.wall0))
	return n
}

// source is one source's lateness, ns.
type source struct {
	name               string
	p50, p90, p99, max int64
	samples            int64
}

// histSource reads a source's quantiles from a lateness histogram; false
// when it holds nothing.
func histSource(name string, h *loghist.Hist) (source, bool) {
	if h == nil || h.N() == 0 {
		return source{}, false
	}
	return source{name: name, p50: h.Quantile(0.5), p90: h.Quantile(0.9), p99: h.Quantile(0.99), max: h.Max(), samples: int64(h.N())}, true
}

// combine joins sources: the largest at each quantile, the samples summed,
// the names joined by "+" in order.
func combine(srcs []source) *timeline.Noise {
	n := &timeline.Noise{}
	names := make([]string, 0, len(srcs))
	for _, s := range srcs {
		names = append(names, s.name)
		n.P50 = max(n.P50, s.p50)
		n.P90 = max(n.P90, s.p90)
		n.P99 = max(n.P99, s.p99)
		n.Max = max(n.Max, s.max)
		n.Samples += s.samples
	}
	n.Source = strings.Join(names, "+")
	return n
}
