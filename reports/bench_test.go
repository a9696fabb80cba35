package reports

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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

// BenchmarkReport renders the full report of a million-attempt timeline
// and compares it with the baseline of only decoding the timeline, in the
// same run:
//
//	go test -run '^$' -bench Report -benchtime 3x ./reports
//
// decode: read every record (the floor for any consumer of the file);
// collect: decode and accumulate everything the report draws;
// report: collect, draw five plots as PNG and SVG, write report.html.
// The report sub-benchmark reports its time as a multiple of decode's
// (x-decode) and the sizes of the largest SVG and of the whole report.
func BenchmarkReport(b *testing.B) {
	path, attempts := benchTimeline(b)
	b.Logf("timeline: %d attempts", attempts)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	var decodeNs float64
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(fi.Size())
		for b.Loop() {
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
		}
		decodeNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("collect", func(b *testing.B) {
		b.SetBytes(fi.Size())
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Collect(f, Options{}); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		if decodeNs > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/decodeNs, "x-decode")
		}
	})
	b.Run("report", func(b *testing.B) {
		b.SetBytes(fi.Size())
		dir := os.Getenv("RETRYLAB_BENCH_REPORT") // keep the report to look at
		if dir == "" {
			dir = b.TempDir()
		}
		for b.Loop() {
			if _, err := Write(dir, path, nil, Options{}); err != nil {
				b.Fatal(err)
			}
		}
		if decodeNs > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/decodeNs, "x-decode")
		}
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
