package runner

import (
	"context"
	"fmt"
	"github.com/retrylab/retrylab/scenarios"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/internal/procstat"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// passthrough is a subject that makes one attempt through the harness
// transport: the benchmark measures the harness, not a retry library.
type passthrough struct{}

func (passthrough) Name() string { return "passthrough" }
func (passthrough) New(next http.RoundTripper, _ subjects.Params) subjects.Caller {
	return func(_ context.Context, req *http.Request) (*http.Response, error) { return next.RoundTrip(req) }
}

// fdBudget is how many connections a size may open: two descriptors per
// loopback connection, under a usual open-files limit (ulimit -n).
const fdBudget = 8000

// BenchmarkFleet compares, in the same run, the real-time fleet (stub with
// every attempt recorded to a timeline file, runner, watchdog, outcomes)
// with a bare loop of http.Client GETs against the same stub recording
// nothing, at the same client and request counts. Metrics: attempts/s of
// each, their ratio, the lateness of scheduled starts, and peak RSS; and
// cpu-ratio, the bare loop's CPU time per attempt over the fleet's (the
// whole call of either side), which moves less with the host's load.
//
//	go test -run '^$' -bench BenchmarkFleet -benchtime 4x ./runner
func BenchmarkFleet(b *testing.B) {
	sizes := []struct{ clients, requests int }{{64, 400}, {1000, 30}, {10000, 4}}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("clients=%d", size.clients), func(b *testing.B) {
			sc := &scenarios.Scenario{Name: "bench", Duration: time.Minute, Fleet: scenarios.Fleet{
				Clients: size.clients, Requests: size.requests, Method: "GET", Timeout: 30 * time.Second}}
			path := filepath.Join(b.TempDir(), "timeline.ndjson")
			var bareDur, fleetDur, bareCPU, fleetCPU time.Duration
			var bareN, fleetN int64
			var last *Summary
			bareFirst := true
			for b.Loop() {
				// Alternate which goes first, so warm-up and the machine's
				// drifting load do not favour one side.
				bareFirst = !bareFirst
				if bareFirst {
					cpu0 := cpuTime()
					d, err := labeledBare(size.clients, size.requests)
					if err != nil {
						b.Fatal(err)
					}
					bareCPU += cpuTime() - cpu0
					bareDur += d
					bareN += int64(size.clients * size.requests)
				}
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				procstat.ResetPeakRSS()
				cpu0 := cpuTime()
				sum, err := labeledRun(sc, RunOptions{Subject: passthrough{}, Timeline: f, MaxConns: fdBudget})
				f.Close()
				fleetCPU += cpuTime() - cpu0
				if err != nil {
					b.Fatal(err)
				}
				if bad := sum.Planned - sum.Results["ok"]; bad*100 > sum.Planned {
					b.Fatalf("fleet: %v of %d ok", sum.Results, sum.Planned)
				} else if bad > 0 {
					b.Logf("fleet: %d of %d requests failed: %s", bad, sum.Planned, firstError(path))
				}
				fleetDur += sum.Elapsed
				fleetN += sum.Attempts
				last = sum
				if !bareFirst {
					cpu0 := cpuTime()
					d, err := labeledBare(size.clients, size.requests)
					if err != nil {
						b.Fatal(err)
					}
					bareCPU += cpuTime() - cpu0
					bareDur += d
					bareN += int64(size.clients * size.requests)
				}
			}
			bare := float64(bareN) / bareDur.Seconds()
			fleet := float64(fleetN) / fleetDur.Seconds()
			b.ReportMetric(bare, "bare-attempts/s")
			b.ReportMetric(fleet, "fleet-attempts/s")
			b.ReportMetric(fleet/bare, "ratio")
			if fleetCPU > 0 {
				b.ReportMetric((bareCPU.Seconds()/float64(bareN))/(fleetCPU.Seconds()/float64(fleetN)), "cpu-ratio")
			}
			b.ReportMetric(float64(last.StartLateness.P50.Microseconds()), "late-p50-µs")
			b.ReportMetric(float64(last.StartLateness.P99.Microseconds()), "late-p99-µs")
			if rss := procstat.PeakRSS(); rss > 0 {
				b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// labeledBare and labeledRun run the bare loop and the fleet under the
// profiler label side=bare or side=fleet, which every goroutine they
// start inherits: a CPU profile of the benchmark is then split by side
// (go tool pprof -tagfocus side=fleet), and a trace has a region of
// either name over it.
func labeledBare(clients, requests int) (d time.Duration, err error) {
	pprof.Do(context.Background(), pprof.Labels("side", "bare"), func(ctx context.Context) {
		defer trace.StartRegion(ctx, "bare").End()
		d, err = bareLoop(clients, requests)
	})
	return d, err
}

func labeledRun(sc *scenarios.Scenario, opts RunOptions) (sum *Summary, err error) {
	pprof.Do(context.Background(), pprof.Labels("side", "fleet"), func(ctx context.Context) {
		defer trace.StartRegion(ctx, "fleet").End()
		sum, err = Run(ctx, sc, opts)
	})
	return sum, err
}

// firstError returns the first outcome error in a timeline file.
func firstError(path string) string {
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, `"error":`); i >= 0 {
			return line[i:]
		}
	}
	return ""
}

// bareLoop runs clients goroutines each making requests GETs with a plain
// http.Client against a stub that records nothing.
func bareLoop(clients, requests int) (time.Duration, error) {
	srv, err := stubserver.New(stubserver.Config{}, stubserver.Options{})
	if err != nil {
		return 0, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	go srv.Serve(l)
	defer srv.Shutdown(context.Background())
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: clients + 16, MaxConnsPerHost: fdBudget, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // one bound for the whole loop
	defer cancel()
	base := "http://" + l.Addr().String()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			for seq := range requests {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+stubserver.RequestPath(i, seq), nil)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return time.Since(start), firstErr
}

// BenchmarkRetryLateness measures, in real time, how late the retrylab
// subject's retries arrive after the instant the server allowed
// (not_before of the previous response, delay-seconds Retry-After): the
// fleet's timer and scheduling lateness as the server sees it.
//
//	go test -run '^$' -bench BenchmarkRetryLateness -benchtime 1x ./runner
func BenchmarkRetryLateness(b *testing.B) {
	sc, err := scenarios.Parse("lateness.yaml", []byte(`
duration: 30s
server:
  phases:
    - {name: down, for: 3s, respond: {status: 503}, retry_after: {form: delta, value: 1}}
    - {name: up, respond: ok}
fleet: {clients: 500, start: ramp 1s, requests: 1}
subject: {name: retrylab, policy: {max_attempts: 10, budget: 20s}}
`))
	if err != nil {
		b.Fatal(err)
	}
	h := loghist.NewAtomic(latenessLayout)
	var early int
	for b.Loop() {
		var buf strings.Builder
		if _, err := Run(context.Background(), sc, RunOptions{Timeline: &buf, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		notBefore := map[string]int64{}
		dec := timeline.NewDecoder(strings.NewReader(buf.String()))
		for {
			var rec timeline.Record
			if err := dec.Decode(&rec); err != nil {
				break
			}
			if rec.Type != timeline.TypeAttempt {
				continue
			}
			a := rec.Attempt
			if nb, ok := notBefore[a.Key]; ok {
				if a.At < nb {
					early++
				}
				h.Add(a.At - nb)
			}
			delete(notBefore, a.Key)
			if a.HasNotBefore {
				notBefore[a.Key] = a.NotBefore
			}
		}
	}
	s := summarizeLateness(h)
	b.ReportMetric(float64(s.P50.Microseconds()), "late-p50-µs")
	b.ReportMetric(float64(s.P99.Microseconds()), "late-p99-µs")
	b.ReportMetric(float64(early), "early")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkProcesses compares, in the same run, a real-time fleet of
// 1,000 clients of the retrylab subject sharing 4 instances
// (fleet.processes 4: one Transport, retry budget and set of buckets per
// process, and a draw source per logical request) with the same fleet
// with one instance per client: attempts/s of each and their ratio
// (shared / own). The stub answers 503 for the first 200 ms, so the
// clients retry and their retry budgets are charged and refunded, then
// 200. Loopback only; each run is capped at a minute.
//
//	go test -run '^$' -bench BenchmarkProcesses -count 3 ./runner
func BenchmarkProcesses(b *testing.B) {
	sc, err := scenarios.Parse("procs.yaml", []byte(`
name: procs
duration: 1m
server:
  phases:
    - {name: down, for: 200ms, respond: {status: 503}}
    - {name: up, respond: ok}
fleet: {clients: 1000, requests: 30, timeout: 30s}
subject: {name: retrylab, policy: {base: 20ms, cap: 200ms, budget: 20s}}
expect: {allow_unexercised: true}
`))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "timeline.ndjson")
	run := func(procs int) (time.Duration, int64) {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		sum, err := Run(context.Background(), sc, RunOptions{Timeline: f, Seed: 1, Processes: procs, MaxConns: fdBudget})
		if err != nil {
			b.Fatal(err)
		}
		// A process's 250 clients share one retry budget: on a quiet
		// host their retries in the 200 ms outage trip it (1,605 of
		// 30,000 gave up), as a service's would. Every request ends ok
		// or given up by the budget; nothing errs or hangs.
		if sum.Results["ok"]+sum.Results["gave-up"] != sum.Planned {
			b.Fatalf("processes %d: %v of %d; want every request ok or given up (%s)", procs, sum.Results, sum.Planned, firstError(path))
		}
		return sum.Elapsed, sum.Attempts
	}
	var ownDur, sharedDur time.Duration
	var ownN, sharedN int64
	sharedFirst := true
	for b.Loop() {
		// Alternate which goes first, as BenchmarkFleet does.
		sharedFirst = !sharedFirst
		if sharedFirst {
			d, n := run(4)
			sharedDur, sharedN = sharedDur+d, sharedN+n
		}
		d, n := run(0)
		ownDur, ownN = ownDur+d, ownN+n
		if !sharedFirst {
			d, n := run(4)
			sharedDur, sharedN = sharedDur+d, sharedN+n
		}
	}
	own := float64(ownN) / ownDur.Seconds()
	shared := float64(sharedN) / sharedDur.Seconds()
	b.ReportMetric(own, "own-attempts/s")
	b.ReportMetric(shared, "shared-attempts/s")
	b.ReportMetric(shared/own, "ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkMeasures measures what each always-on measurement of a
// real-time run costs the fleet: in the same run, the bare loop, the
// fleet as it runs (every measurement on), and the fleet with one
// measurement off or added, in an order drawn anew each round, each run
// after a garbage collection (a run pays for its predecessor's garbage
// otherwise, and in a rotation one variant always follows the bare loop).
//
// Off: the noise meter (its sleep loop, its reads of the scheduler's
// latencies and of PSI at start and stop), its sleep loop alone, the
// stub's receipt stamps, the heap floor, the timeline (no file: no
// attempt or outcome is recorded), and all of them at once. Added: the
// CLI's progress bars (mpb, as cmd/retrylab draws them, to io.Discard),
// and a probe process beside the fleet (an exec fleet runs one; a
// goroutine fleet does not). Metrics: each one's attempts/s over the
// bare loop's (ratio-fleet, ratio-no-meter, ...). A measurement costs the
// fleet the gap between ratio-fleet and its ratio-no-X (or ratio-X).
// cpu-ratio-X is the same with CPU time (user and system, the whole call
// of either side: the stub's start and the teardown too) per attempt,
// bare over X: what a host that gives the benchmark a fixed share of its
// CPU, or a loaded one, sees; the wall ratios move with the host's load.
//
//	go test -run '^$' -bench BenchmarkMeasures -benchtime 4x ./runner
func BenchmarkMeasures(b *testing.B) {
	type variant struct {
		name       string
		off        measures
		noTimeline bool
		progress   bool
		probe      bool
	}
	variants := []variant{
		{name: "fleet"},
		{name: "no-meter", off: measures{meter: true}},
		{name: "no-sleep", off: measures{sleep: true}},
		{name: "no-stamps", off: measures{stamps: true}},
		{name: "no-heap-floor", off: measures{heapFloor: true}},
		{name: "no-timeline", noTimeline: true},
		{name: "none", off: measures{meter: true, stamps: true, heapFloor: true}, noTimeline: true},
		{name: "progress", progress: true},
		{name: "probe", probe: true},
	}
	if v := os.Getenv("MEASURES"); v != "" { // a subset, by name: MEASURES=fleet,none
		keep := strings.Split(v, ",")
		variants = slices.DeleteFunc(variants, func(x variant) bool { return !slices.Contains(keep, x.name) })
	}
	probe := probeCommand(b)
	sizes := []struct{ clients, requests int }{{64, 400}, {1000, 30}, {10000, 4}}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("clients=%d", size.clients), func(b *testing.B) {
			sc := &scenarios.Scenario{Name: "bench", Duration: time.Minute, Fleet: scenarios.Fleet{
				Clients: size.clients, Requests: size.requests, Method: "GET", Timeout: 30 * time.Second}}
			path := filepath.Join(b.TempDir(), "timeline.ndjson")
			var bareDur, bareCPU time.Duration
			var bareN int64
			durs := make([]time.Duration, len(variants))
			cpus := make([]time.Duration, len(variants))
			ns := make([]int64, len(variants))
			rng := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				for _, k := range rng.Perm(len(variants) + 1) { // k == len: the bare loop
					runtime.GC()
					if k == len(variants) {
						cpu0 := cpuTime()
						d, err := labeledBare(size.clients, size.requests)
						if err != nil {
							b.Fatal(err)
						}
						bareCPU += cpuTime() - cpu0
						bareDur += d
						bareN += int64(size.clients * size.requests)
						continue
					}
					v := variants[k]
					opts := RunOptions{Subject: passthrough{}, MaxConns: fdBudget, off: v.off}
					var f *os.File
					if !v.noTimeline {
						var err error
						if f, err = os.Create(path); err != nil {
							b.Fatal(err)
						}
						opts.Timeline = f
					}
					var bars *benchBars
					if v.progress {
						bars = newBenchBars()
						opts.Progress = bars.update
					}
					var meter *noise.Meter
					if v.probe {
						meter = noise.Start(noise.Options{Probe: probe, NoSleep: true})
					}
					cpu0 := cpuTime()
					sum, err := labeledRun(sc, opts)
					if f != nil {
						f.Close()
					}
					bars.finish()
					cpus[k] += cpuTime() - cpu0
					if n := meter.Stop(); meter != nil && !strings.Contains(n.Source, timeline.NoiseProbe) {
						b.Fatalf("probe: no report (%s)", n.Source)
					}
					if err != nil {
						b.Fatal(err)
					}
					if bad := sum.Planned - sum.Results["ok"]; bad*100 > sum.Planned {
						b.Fatalf("%s: %v of %d ok: %s", v.name, sum.Results, sum.Planned, firstError(path))
					}
					durs[k] += sum.Elapsed
					ns[k] += sum.Attempts
				}
			}
			bare := float64(bareN) / bareDur.Seconds()
			bareCPUPer := bareCPU.Seconds() / float64(bareN)
			b.ReportMetric(bare, "bare-attempts/s")
			b.ReportMetric(bareCPUPer*1e6, "bare-cpu-µs/attempt")
			for k, v := range variants {
				b.ReportMetric(float64(ns[k])/durs[k].Seconds()/bare, "ratio-"+v.name)
				if cpus[k] > 0 {
					b.ReportMetric(bareCPUPer/(cpus[k].Seconds()/float64(ns[k])), "cpu-ratio-"+v.name)
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchBars draws a run's progress as cmd/retrylab's bars do (mpb,
// refreshed every 150 ms), to io.Discard: what drawing them costs.
type benchBars struct {
	p   *mpb.Progress
	bar *mpb.Bar
	n   atomic.Int64
}

func newBenchBars() *benchBars {
	b := &benchBars{p: mpb.New(mpb.WithOutput(io.Discard), mpb.WithAutoRefresh(), mpb.WithRefreshRate(150*time.Millisecond))}
	b.bar = b.p.New(0, mpb.BarStyle(),
		mpb.PrependDecorators(decor.Name("bench ", decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d requests", decor.WCSyncWidth)),
		mpb.AppendDecorators(
			decor.Any(func(decor.Statistics) string { return fmt.Sprintf("attempts %d", b.n.Load()) }, decor.WC{W: 5}),
			decor.Elapsed(decor.ET_STYLE_GO), decor.AverageETA(decor.ET_STYLE_GO)))
	return b
}

func (b *benchBars) update(p Progress) {
	b.n.Store(p.Attempts)
	b.bar.SetTotal(p.Total, false)
	b.bar.SetCurrent(p.Done)
}

func (b *benchBars) finish() {
	if b == nil {
		return
	}
	b.bar.SetTotal(-1, true)
	b.p.Wait()
}
