package timeline

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var benchMergeRecords = flag.Int("bench-merge-records", 1_000_000, "attempts and outcomes in the synthetic files of BenchmarkMerge")

// writeMergeBench writes the files of a run spread over five processes
// into dir: two stub recordings (each logical request's attempts spread
// over both, as a load balancer would, each stub numbering what it saw)
// and three fleet shards' outcomes and end records; n records in all,
// 2,000 logical requests in flight, 10 µs of run time between records.
func writeMergeBench(dir string, n int) ([]string, error) {
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	phases := []Phase{{Name: "outage", Start: 0, End: int64(time.Minute), Respond: "status 503"}, {Name: "recovered", Start: int64(time.Minute), Respond: "ok"}}
	var paths []string
	var files []*os.File
	var encs []*Encoder
	for i := range 5 {
		m := &Meta{Format: Format, Recorder: "serve", Scenario: "bench", Seed: 1, Start: epoch, Epoch: epoch, Host: "h" + strconv.Itoa(i), Phases: phases}
		name := fmt.Sprintf("stub-%d.ndjson", i)
		if i >= 2 {
			m.Recorder, m.Subject, m.Shard, m.Fleet = "run", "retrylab", fmt.Sprintf("%d/3", i-2), &Fleet{Clients: 10000, Requests: 1 << 20}
			name = fmt.Sprintf("shard-%d.ndjson", i-2)
		}
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		enc := NewEncoder(f)
		if err := enc.EncodeMeta(m); err != nil {
			return nil, err
		}
		paths, files, encs = append(paths, p), append(files, f), append(encs, enc)
	}
	type slot struct {
		client, seq, attempt, want int
		seen                       [2]int // attempts each stub saw
		start                      int64
		key, cs, path              string
	}
	r := rand.New(rand.NewPCG(1, 2))
	const inflight = 2000
	slots := make([]slot, inflight)
	seq := 0
	next := func(s *slot, now int64) {
		*s = slot{client: r.IntN(10000), seq: seq, want: 1 + r.IntN(4), start: now}
		seq++
		s.cs = strconv.Itoa(s.client)
		s.key = s.cs + "/" + strconv.Itoa(s.seq)
		s.path = "/c/" + s.cs + "/r/" + strconv.Itoa(s.seq)
	}
	now := int64(2 * time.Millisecond)
	for i := range slots {
		next(&slots[i], now)
	}
	written := 0
	for written < n {
		for i := range slots {
			s := &slots[i]
			now += int64(10 * time.Microsecond)
			s.attempt++
			stub := (s.client + s.attempt) % 2
			s.seen[stub]++
			a := Attempt{Client: s.cs, Key: s.key, Attempt: s.seen[stub], Method: "GET", Path: s.path,
				At: now - int64(2*time.Millisecond), Done: now, Status: 200, Phase: "recovered"}
			if s.attempt < s.want {
				a.Status, a.Phase, a.RetryAfter, a.NotBefore, a.HasNotBefore = 503, "outage", "1", now+int64(time.Second), true
			}
			if err := encs[stub].EncodeAttempt(&a); err != nil {
				return nil, err
			}
			written++
			if s.attempt == s.want && written < n {
				now += int64(10 * time.Microsecond)
				o := Outcome{Client: s.cs, Key: s.key, Scheduled: s.start, Start: s.start, End: now, Result: ResultOK, Status: 200, Attempts: s.attempt}
				if err := encs[2+s.client%3].EncodeOutcome(&o); err != nil {
					return nil, err
				}
				written++
				next(s, now)
			}
			if written >= n {
				break
			}
		}
	}
	for i, enc := range encs {
		if i >= 2 {
			if err := enc.EncodeEnd(&End{At: now, Reason: EndCompleted}); err != nil {
				return nil, err
			}
		}
		if err := enc.Flush(); err != nil {
			return nil, err
		}
		if err := files[i].Close(); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// peakHeapSampler samples HeapInuse every 20 ms until stopped.
func peakHeapSampler() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak.Load() {
			peak.Store(ms.HeapInuse)
		}
	}
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		sample()
		return peak.Load()
	}
}

// BenchmarkMerge merges the five files of a spread run (two stubs whose
// attempts a load balancer spread, so about half are renumbered; three
// fleet shards) into a file on disk, against two baselines measured in the
// same run: the same merge without the coverage check (Merge before it,
// mergeCoverage off; the two alternate which goes first), and the same
// records decoded and re-encoded file by file (no merge). Metrics:
// records/s of each, the ratios merge/codec and merge/uncovered, the CPU
// time per record of both merges and their ratio (CPU time is what a
// loaded machine does not inflate), the peak
// heap during each merge (sampled every 20 ms), and the most logical
// requests the coverage table held at once.
//
//	go test -run '^$' -bench BenchmarkMerge -benchtime 3x ./timeline
//	go test -run '^$' -bench BenchmarkMerge -benchtime 1x ./timeline -bench-merge-records 10000000
func BenchmarkMerge(b *testing.B) {
	dir := b.TempDir()
	paths, err := writeMergeBench(dir, *benchMergeRecords)
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "merged.ndjson")
	open := func() ([]MergeInput, func()) {
		var in []MergeInput
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			in = append(in, MergeInput{Name: p, R: f})
		}
		return in, func() {
			for _, i := range in {
				i.R.(*os.File).Close()
			}
		}
	}
	defer func(v bool) { mergeCoverage = v }(mergeCoverage)
	// merge runs one merge, with or without the coverage check, and adds
	// its time and peak heap to d and peak.
	merge := func(covered bool, d, cpu *time.Duration, peak *uint64) *MergeSummary {
		mergeCoverage = covered
		runtime.GC()
		in, closeIn := open()
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		stop := peakHeapSampler()
		start, cpu0 := time.Now(), processCPU()
		sum, err := Merge(f, in, MergeOptions{})
		*d += time.Since(start)
		*cpu += processCPU() - cpu0
		*peak = max(*peak, stop())
		closeIn()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
		if got := sum.Attempts + sum.Outcomes; got != int64(*benchMergeRecords) || sum.Renumbered == 0 {
			b.Fatalf("merged %d records, renumbered %d; want %d, some renumbered", got, sum.Renumbered, *benchMergeRecords)
		}
		if covered && (sum.CoverageKeys == 0 || len(sum.Problems) > 0) {
			b.Fatalf("coverage: table of %d requests at most, problems %q; want some, none", sum.CoverageKeys, sum.Problems)
		}
		return sum
	}
	var mergeD, plainD, copyD, mergeCPU, plainCPU time.Duration
	var records int64
	var peak, plainPeak uint64
	tracked, iter := 0, 0
	for b.Loop() {
		var sum *MergeSummary
		if iter%2 == 0 {
			merge(false, &plainD, &plainCPU, &plainPeak)
			sum = merge(true, &mergeD, &mergeCPU, &peak)
		} else {
			sum = merge(true, &mergeD, &mergeCPU, &peak)
			merge(false, &plainD, &plainCPU, &plainPeak)
		}
		iter++
		tracked = sum.CoverageKeys
		records += sum.Attempts + sum.Outcomes

		// The baseline: the same records through the codec alone.
		in, closeIn := open()
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		enc := NewEncoder(f)
		for _, i := range in {
			dec := NewDecoder(i.R)
			var rec Record
			for {
				err := dec.Decode(&rec)
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				switch rec.Type {
				case TypeAttempt:
					err = enc.EncodeAttempt(&rec.Attempt)
				case TypeOutcome:
					err = enc.EncodeOutcome(&rec.Outcome)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := enc.Flush(); err != nil {
			b.Fatal(err)
		}
		copyD += time.Since(start)
		closeIn()
		f.Close()
	}
	rate := float64(records) / mergeD.Seconds()
	plain := float64(records) / plainD.Seconds()
	cp := float64(records) / copyD.Seconds()
	b.ReportMetric(rate, "merge-records/s")
	b.ReportMetric(plain, "uncovered-records/s")
	b.ReportMetric(cp, "codec-records/s")
	b.ReportMetric(rate/cp, "ratio")
	b.ReportMetric(rate/plain, "covered/uncovered")
	if plainCPU > 0 {
		// CPU time (the process's, decoding goroutines included) tells
		// the work apart from the wait on a loaded machine.
		b.ReportMetric(float64(mergeCPU.Nanoseconds())/float64(records), "merge-cpu-ns/record")
		b.ReportMetric(float64(plainCPU.Nanoseconds())/float64(records), "uncovered-cpu-ns/record")
		b.ReportMetric(float64(mergeCPU)/float64(plainCPU), "cpu-covered/uncovered")
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(plainPeak)/(1<<20), "uncovered-peak-heap-MiB")
	b.ReportMetric(float64(tracked), "coverage-keys")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkMergeCoverage is the coverage check alone, on BenchmarkMerge's
// pattern: 2,000 logical requests in flight, 1-4 attempts each, then the
// outcome; one op is one attempt (and its request's outcome after the
// last), the key's string made included. Against the merge's CPU time per
// record (BenchmarkMerge's merge-cpu-ns/record), cpu-ns/op is the check's
// share.
func BenchmarkMergeCoverage(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	type slot struct {
		key     string
		n, want int
	}
	slots := make([]slot, 2000)
	seq := 0
	next := func(s *slot) {
		*s = slot{key: strconv.Itoa(r.IntN(10000)) + "/" + strconv.Itoa(seq), want: 1 + r.IntN(4)}
		seq++
	}
	for i := range slots {
		next(&slots[i])
	}
	c := newCoverage()
	o := Outcome{Status: 200, Result: ResultOK}
	i := 0
	cpu0 := processCPU()
	for b.Loop() {
		s := &slots[i%len(slots)]
		i++
		c.attempt(s.key)
		if s.n++; s.n == s.want {
			o.Key, o.Attempts = s.key, s.n
			c.outcome(&o, 2)
			next(s)
		}
	}
	if p := c.problems(make([]*mergeSrc, 3)); len(p) > 0 || c.len() > len(slots) {
		b.Fatalf("%d requests held, problems %q; want at most %d, none", c.len(), p, len(slots))
	}
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(i), "cpu-ns/op")
	}
	b.ReportMetric(float64(c.peak), "peak-requests")
}
