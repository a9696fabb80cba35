package retrylabtest_test

import (
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
// time (run + analysis) and reports CPU-seconds per run, the logical
// requests per run, and whether the two timelines hashed alike (1).
//
//	go test -run '^$' -bench BenchmarkVirtual -benchtime 1x ./retrylabtest
func BenchmarkVirtual(b *testing.B) {
	for _, think := range []string{"1s", "500ms"} {
		b.Run("think="+think, func(b *testing.B) {
			sc, err := scenarios.Parse("virtual-bench.yaml", []byte(strings.Replace(virtualBench, "THINK", think, 1)))
			if err != nil {
				b.Fatal(err)
			}
			var cpu time.Duration
			runs, equal := 0, 1.0
			var requests, attempts int64
			for b.Loop() {
				c0 := cpuTime()
				r1 := retrylabtest.Run(b, sc, "retrylab", retrylabtest.WithSeed(7))
				c1 := cpuTime()
				r2 := retrylabtest.Run(b, sc, "retrylab", retrylabtest.WithSeed(7))
				c2 := cpuTime()
				cpu += c2 - c0
				runs += 2
				if r1.Hash != r2.Hash {
					equal = 0
					b.Errorf("same seed, different timelines: %s vs %s", r1.Hash, r2.Hash)
				}
				requests, attempts = r1.Summary.Requests, r1.Summary.Attempts
				b.Logf("run: %d logical requests, %d attempts, %d timeline bytes, stopped %q, verdict pass %v; cpu %v + %v",
					r1.Summary.Requests, r1.Summary.Attempts, len(r1.Timeline), r1.Summary.Stopped, r1.Verdict.Pass, c1-c0, c2-c1)
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
// every request after 10 ms without it. It reports CPU-seconds per run of
// each and their ratio, the attempts, and whether two runs with the same
// seed hashed alike (1).
//
//	go test -run '^$' -bench BenchmarkMetastable -benchtime 1x ./retrylabtest
func BenchmarkMetastable(b *testing.B) {
	parse := func(capacity, trigger string) *scenarios.Scenario {
		y := strings.NewReplacer("CAPACITY", capacity, "TRIGGER", trigger).Replace(metastableBench)
		sc, err := scenarios.Parse("metastable-bench.yaml", []byte(y))
		if err != nil {
			b.Fatal(err)
		}
		return sc
	}
	model := parse("capacity: {concurrency: 10, queue: 100, service: 10ms, dist: fixed}", ", capacity: 30%")
	base := parse("latency: 10ms", "")
	for _, subj := range []string{"retrylab", "no-retry-budget"} {
		b.Run(subj, func(b *testing.B) {
			var cpu, baseCPU time.Duration
			runs, equal := 0, 1.0
			var attempts, baseAttempts int64
			var recovery float64
			for b.Loop() {
				c0 := cpuTime()
				r1 := retrylabtest.Run(b, model, subj, retrylabtest.WithSeed(7))
				c1 := cpuTime()
				bl := retrylabtest.Run(b, base, subj, retrylabtest.WithSeed(7))
				c2 := cpuTime()
				r2 := retrylabtest.Run(b, model, subj, retrylabtest.WithSeed(7))
				c3 := cpuTime()
				cpu += c1 - c0 + c3 - c2
				baseCPU += c2 - c1
				runs++
				if r1.Hash != r2.Hash {
					equal = 0
					b.Errorf("same seed, different timelines: %s vs %s", r1.Hash, r2.Hash)
				}
				attempts, baseAttempts = r1.Summary.Attempts, bl.Summary.Attempts
				if c := r1.Verdict.Check("recovery"); c != nil {
					recovery = c.Figure
				}
				b.Logf("%s: %d requests, %d attempts, verdict pass %v (failed %v); cpu %v and %v; baseline %d attempts, cpu %v",
					subj, r1.Summary.Requests, attempts, r1.Verdict.Pass, r1.Failed(), c1-c0, c3-c2, baseAttempts, c2-c1)
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
