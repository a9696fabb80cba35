//go:build unix

package reports

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// benchSynth is about a million attempts: 20,000 clients, 28 logical
// requests each.
var benchSynth = synth{clients: 20000, requests: 28, seed: 1}

var (
	benchOnce     sync.Once
	benchPath     string
	benchAttempts int
	benchErr      error
)

// benchTimeline writes the million-attempt timeline once per test binary.
func benchTimeline(b *testing.B) (string, int) {
	b.Helper()
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "reports-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchPath = filepath.Join(dir, "timeline.ndjson")
		f, err := os.Create(benchPath)
		if err != nil {
			benchErr = err
			return
		}
		w := bufio.NewWriterSize(f, 1<<20)
		benchAttempts, benchErr = benchSynth.write(w)
		if benchErr == nil {
			benchErr = w.Flush()
		}
		if err := f.Close(); benchErr == nil {
			benchErr = err
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPath, benchAttempts
}

// cpuTime is the CPU time (user + system, every thread) the process has
// used so far. On a machine shared with other work it varies much less than
// wall time, so the ratios use it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReport renders the full report of a million-attempt timeline
// and compares it with the baseline of only decoding the timeline, in the
// same run:
//
//	go test -run '^$' -bench Report -benchtime 3x ./reports
//
// decode: read every record (the floor for any consumer of the file);
// collect: decode and accumulate everything the report draws;
// report: collect, draw five plots as PNG and SVG, write report.html.
// Each sub-benchmark reports its CPU time per op (cpu-ms/op; wall time on a
// shared machine is noisy); collect and report give theirs as a multiple of
// decode's (x-decode-cpu). report also gives the sizes of the largest SVG
// and of the whole report, collect the heap a collector holds at the end.
func BenchmarkReport(b *testing.B) {
	path, attempts := benchTimeline(b)
	b.Logf("timeline: %d attempts", attempts)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	var decodeCPU float64
	// cpuPerOp runs body b.N times (b.Loop) and reports CPU ms per op.
	cpuPerOp := func(b *testing.B, body func()) float64 {
		start := cpuTime()
		for b.Loop() {
			body()
		}
		per := float64(cpuTime()-start) / float64(b.N)
		b.ReportMetric(per/1e6, "cpu-ms/op")
		if decodeCPU > 0 {
			b.ReportMetric(per/decodeCPU, "x-decode-cpu")
		}
		return per
	}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(fi.Size())
		decodeCPU = 0
		decodeCPU = cpuPerOp(b, func() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			dec := timeline.NewDecoder(f)
			var rec timeline.Record
			for {
				if err := dec.Decode(&rec); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
			f.Close()
		})
	})
	b.Run("collect", func(b *testing.B) {
		b.SetBytes(fi.Size())
		cpuPerOp(b, func() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Collect(f, Options{}); err != nil {
				b.Fatal(err)
			}
			f.Close()
		})
		// The memory a collector holds once it has seen every record.
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c, err := Collect(f, Options{})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(c)
		b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "collector-heap-bytes")
	})
	b.Run("report", func(b *testing.B) {
		b.SetBytes(fi.Size())
		dir := os.Getenv("RETRYLAB_BENCH_REPORT") // keep the report to look at
		if dir == "" {
			dir = b.TempDir()
		}
		cpuPerOp(b, func() {
			if _, err := Write(dir, path, nil, Options{}); err != nil {
				b.Fatal(err)
			}
		})
		entries, err := os.ReadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		var maxSVG, total int64
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				b.Fatal(err)
			}
			total += info.Size()
			if strings.HasSuffix(e.Name(), ".svg") {
				maxSVG = max(maxSVG, info.Size())
			}
			b.Logf("%s: %d bytes", e.Name(), info.Size())
		}
		b.ReportMetric(float64(attempts), "attempts")
		b.ReportMetric(float64(maxSVG), "max-svg-bytes")
		b.ReportMetric(float64(total), "report-bytes")
	})
}
