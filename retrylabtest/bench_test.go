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
