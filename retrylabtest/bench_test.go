package retrylabtest_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
)

// virtualBench is 1,000 clients for 60 virtual seconds: 10 s fine, 10 s of
// 503s with a spread delay-seconds Retry-After, then fine until the cap.
const virtualBench = `
name: virtual-bench
duration: 60s
server:
  latency: 2ms
  phases:
    - {name: up, for: 10s, respond: ok}
    - {name: down, for: 10s, respond: {status: 503}, retry_after: {form: delta, value: 2, spread: 1s}}
    - {name: recovered, respond: ok}
fleet: {clients: 1000, start: ramp 5s, requests: 1000, think: THINK, timeout: 30s}
subject: {name: retrylab, policy: {base: 100ms, cap: 5s, max_attempts: 8, budget: 20s}}
expect: {checks: [retry-after, instant-retry, attempts, budget]}
`

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVirtual runs the scenario above twice per iteration in virtual
// time (run + analysis), each run in a child process (see runInChild), and
// reports CPU-seconds per run, the logical requests per run, and whether
// the two timelines hashed alike (1).
//
//	go test -run '^$' -bench BenchmarkVirtual -benchtime 1x ./retrylabtest
func BenchmarkVirtual(b *testing.B) {
	for _, think := range []string{"1s", "500ms"} {
		b.Run("think="+think, func(b *testing.B) {
			var cpu time.Duration
			runs, equal := 0, 1.0
			var requests, attempts int64
			for b.Loop() {
				r1 := runInChild(b, "virtual/"+think)
				r2 := runInChild(b, "virtual/"+think)
				cpu += r1.CPU + r2.CPU
				runs += 2
				if r1.Hash != r2.Hash {
					equal = 0
					b.Errorf("same seed, different timelines: %s vs %s", r1.Hash, r2.Hash)
				}
				requests, attempts = r1.Requests, r1.Attempts
				b.Logf("run: %d logical requests, %d attempts, %d timeline bytes, stopped %q, verdict pass %v; cpu %v + %v",
					r1.Requests, r1.Attempts, r1.TimelineBytes, r1.Stopped, r1.Pass, r1.CPU, r2.CPU)
			}
			b.ReportMetric(cpu.Seconds()/float64(runs), "cpu-s/run")
			b.ReportMetric(float64(requests), "requests/run")
			b.ReportMetric(float64(attempts), "attempts/run")
			b.ReportMetric(equal, "hash-equal")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// metastableBench is the built-in metastable's server and trigger (10
// workers × 10 ms, a queue of 100, 5 s at 30 % of the workers, 30 ms
// per-attempt timeouts) under the same offered load, 80 % of capacity,
// spread over 1,000 clients for 60 virtual seconds: each thinks 1.24 s
// between requests (1,000 / 1.25 s = 800 requests/s). CAPACITY is the
// capacity line and TRIGGER the trigger's scaling, or, for the baseline,
// a latency of the same 10 ms and nothing.
const metastableBench = `
name: metastable-bench
duration: 60s
server:
  headers: none
  CAPACITY
  phases:
    - {name: steady, for: 10s, respond: ok}
    - {name: trigger, for: 5s, respond: ok TRIGGER}
    - {name: after, respond: ok}
fleet: {clients: 1000, start: ramp 1s, requests: 100, think: 1240ms, timeout: 3s}
subject:
  policy: {base: 10ms, cap: 50ms, budget: 1s, jitter: full, timeout: 30ms}
expect:
  checks: [recovery, load-amplification, wasted-work, attempts, budget]
`

// BenchmarkMetastable runs metastableBench in virtual time (run and
// analysis) for a subject, with the capacity model and, in the same
// iteration, the baseline: the same fleet against a stub that answers
// every request after 10 ms without it. Each run is in a child process
// (see runInChild). It reports CPU-seconds per run of each and their
// ratio, the attempts, and whether two runs with the same seed hashed
// alike (1).
//
//	go test -run '^$' -bench BenchmarkMetastable -benchtime 1x ./retrylabtest
func BenchmarkMetastable(b *testing.B) {
	for _, subj := range []string{"retrylab", "no-retry-budget"} {
		b.Run(subj, func(b *testing.B) {
			var cpu, baseCPU time.Duration
			runs, equal := 0, 1.0
			var attempts, baseAttempts int64
			var recovery float64
			for b.Loop() {
				r1 := runInChild(b, "metastable/model/"+subj)
				bl := runInChild(b, "metastable/base/"+subj)
				r2 := runInChild(b, "metastable/model/"+subj)
				cpu += r1.CPU + r2.CPU
				baseCPU += bl.CPU
				runs++
				if r1.Hash != r2.Hash {
					equal = 0
					b.Errorf("same seed, different timelines: %s vs %s", r1.Hash, r2.Hash)
				}
				attempts, baseAttempts, recovery = r1.Attempts, bl.Attempts, r1.Recovery
				b.Logf("%s: %d requests, %d attempts, verdict pass %v (failed %v); cpu %v and %v; baseline %d attempts, cpu %v",
					subj, r1.Requests, attempts, r1.Pass, r1.Failed, r1.CPU, r2.CPU, baseAttempts, bl.CPU)
			}
			b.ReportMetric(cpu.Seconds()/float64(2*runs), "cpu-s/run")
			b.ReportMetric(baseCPU.Seconds()/float64(runs), "base-cpu-s/run")
			b.ReportMetric(cpu.Seconds()/2/baseCPU.Seconds(), "cpu-ratio")
			b.ReportMetric(float64(attempts), "attempts/run")
			b.ReportMetric(float64(baseAttempts), "base-attempts/run")
			b.ReportMetric(recovery, "recovery-s")
			b.ReportMetric(equal, "hash-equal")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchRun names the one run TestBenchRun makes, in a benchmark's child
// process: "virtual/THINK" (virtualBench with that think time),
// "metastable/model/SUBJECT" (metastableBench with its capacity model) or
// "metastable/base/SUBJECT" (its baseline).
var benchRun = flag.String("bench-run", "", "the run TestBenchRun makes for a benchmark (virtual/THINK, metastable/model|base/SUBJECT, metastable-open/RATE/SUBJECT)")

// benchScenario returns the scenario and the subject a -bench-run names.
func benchScenario(run string) (*scenarios.Scenario, string, error) {
	parts := strings.Split(run, "/")
	switch {
	case len(parts) == 2 && parts[0] == "virtual":
		sc, err := scenarios.Parse("virtual-bench.yaml", []byte(strings.Replace(virtualBench, "THINK", parts[1], 1)))
		return sc, "retrylab", err
	case len(parts) == 3 && parts[0] == "metastable" && (parts[1] == "model" || parts[1] == "base"):
		capacity, trigger := "capacity: {concurrency: 10, queue: 100, service: 10ms, dist: fixed}", ", capacity: 30%"
		if parts[1] == "base" {
			capacity, trigger = "latency: 10ms", ""
		}
		y := strings.NewReplacer("CAPACITY", capacity, "TRIGGER", trigger).Replace(metastableBench)
		sc, err := scenarios.Parse("metastable-bench.yaml", []byte(y))
		return sc, parts[2], err
	case len(parts) == 3 && parts[0] == "metastable-open":
		var rate int
		if _, err := fmt.Sscan(parts[1], &rate); err != nil || rate <= 0 {
			return nil, "", fmt.Errorf("-bench-run %q: bad arrival rate %q", run, parts[1])
		}
		sc, err := openAtRate(rate)
		return sc, parts[2], err
	}
	return nil, "", fmt.Errorf("-bench-run %q: want virtual/THINK, metastable/model|base/SUBJECT or metastable-open/RATE/SUBJECT", run)
}

// openAtRate is the built-in metastable-open scaled to rate arrivals per
// second: workers and queue × rate/200 (so the load stays 80 % and the
// queue's delay 400 ms), the same trigger, arrivals for 56 s of a 60 s
// run (its fleet timeout, 2 s, and margin after them). At 200/s it is the
// built-in's server for 60 s.
func openAtRate(rate int) (*scenarios.Scenario, error) {
	sc, err := scenarios.Builtin("metastable-open")
	if err != nil {
		return nil, err
	}
	k := float64(rate) / sc.Fleet.Start.Rate
	sc.Name = fmt.Sprintf("metastable-open-%d", rate)
	sc.Server.Capacity.Concurrency = int(float64(sc.Server.Capacity.Concurrency) * k)
	sc.Server.Capacity.Queue = int(float64(sc.Server.Capacity.Queue) * k)
	sc.Fleet.Start.Rate = float64(rate)
	sc.Fleet.Clients = rate * 56
	sc.Duration = 60 * time.Second
	return sc, nil
}

// BenchmarkMetastableOpen runs metastable-open scaled to 1,000 arrivals a
// second for 60 virtual seconds (56,000 one-request clients, 4
// processes), run and analysis, each run in a child process, and in the
// same iteration the built-in's own rate (200/s, 11,200 clients) as the
// baseline; it reports CPU-seconds per run of each, their ratio, the
// attempts, and whether two runs with the same seed hashed alike (1).
//
//	go test -run '^$' -bench BenchmarkMetastableOpen -benchtime 1x ./retrylabtest
func BenchmarkMetastableOpen(b *testing.B) {
	// Our client only: no-retry-budget's storm at 1,000/s would be ten
	// times the attempts, a benchmark of the storm rather than of the run.
	for _, subj := range []string{"retrylab"} {
		b.Run(subj, func(b *testing.B) {
			var cpu, baseCPU time.Duration
			runs, equal := 0, 1.0
			var attempts, requests, baseAttempts int64
			for b.Loop() {
				r1 := runInChild(b, "metastable-open/1000/"+subj)
				bl := runInChild(b, "metastable-open/200/"+subj)
				r2 := runInChild(b, "metastable-open/1000/"+subj)
				cpu += r1.CPU + r2.CPU
				baseCPU += bl.CPU
				runs++
				if r1.Hash != r2.Hash {
					equal = 0
					b.Errorf("same seed, different timelines: %s vs %s", r1.Hash, r2.Hash)
				}
				attempts, requests, baseAttempts = r1.Attempts, r1.Requests, bl.Attempts
				b.Logf("%s at 1000/s: %d requests, %d attempts, verdict pass %v (failed %v), recovery %.2f s; cpu %v and %v; at 200/s %d attempts, cpu %v",
					subj, r1.Requests, attempts, r1.Pass, r1.Failed, r1.Recovery, r1.CPU, r2.CPU, baseAttempts, bl.CPU)
			}
			b.ReportMetric(cpu.Seconds()/float64(2*runs), "cpu-s/run")
			b.ReportMetric(baseCPU.Seconds()/float64(runs), "base-cpu-s/run")
			b.ReportMetric(cpu.Seconds()/2/baseCPU.Seconds(), "cpu-ratio")
			b.ReportMetric(float64(requests), "requests/run")
			b.ReportMetric(float64(attempts), "attempts/run")
			b.ReportMetric(float64(baseAttempts), "base-attempts/run")
			b.ReportMetric(equal, "hash-equal")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchResult is what a benchmark reads of a run made in a child process.
type benchResult struct {
	Hash               string
	Requests, Attempts int64
	TimelineBytes      int
	Stopped            string
	Pass               bool
	Failed             []string
	Recovery           float64       // the recovery check's figure (0 without it)
	CPU                time.Duration // the process's CPU time over the run and its analysis
}

// benchResultPrefix starts the line TestBenchRun prints its result on.
const benchResultPrefix = "retrylabtest-bench-result: "

// TestBenchRun makes the run -bench-run names, with seed 7, and prints
// its benchResult; without the flag it is skipped. The benchmarks above
// start it in a child process (runInChild); to profile one run:
//
//	go test -run TestBenchRun -cpuprofile cpu.out ./retrylabtest -args -bench-run virtual/1s
func TestBenchRun(t *testing.T) {
	if *benchRun == "" {
		t.Skip("a benchmark's run in a child process: -bench-run names it")
	}
	sc, subj, err := benchScenario(*benchRun)
	if err != nil {
		t.Fatal(err)
	}
	c0 := cpuTime()
	r := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered(subj), retrylabtest.WithSeed(7))
	out := benchResult{Hash: r.Hash, Requests: r.Summary.Requests, Attempts: r.Summary.Attempts, TimelineBytes: len(r.Timeline),
		Stopped: r.Summary.Stopped, Pass: r.Verdict.Pass, Failed: r.Failed(), CPU: cpuTime() - c0}
	if c := r.Verdict.Check("recovery"); c != nil {
		out.Recovery = c.Figure
	}
	line, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", benchResultPrefix, line)
}

// runInChild makes one benchmark run (a -bench-run) in a child process of
// this test binary, TestBenchRun, and returns its result. retrylabtest.Run
// plays a run in a synctest bubble of its own, which needs a *testing.T: a
// benchmark has none, a test in another process does. The child measures
// its own CPU time around the run, as the benchmark did in-process.
func runInChild(b *testing.B, run string) benchResult {
	b.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchRun$", "-test.count=1", "-test.timeout=30m", "-bench-run="+run)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	for line := range strings.Lines(stdout.String()) {
		if rest, ok := strings.CutPrefix(line, benchResultPrefix); ok {
			var r benchResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				b.Fatalf("%s: %v in %q", run, err, rest)
			}
			return r
		}
	}
	b.Fatalf("%s: the child run printed no result (%v):\n%s%s", run, err, stdout.Bytes(), stderr.Bytes())
	return benchResult{}
}
