package analyzer

import (
	"bufio"
	"encoding/json"
	"flag"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

var benchAttempts = flag.Int("bench-attempts", 1_000_000, "attempts in the synthetic timeline of BenchmarkAnalyzeFile")

var benchFile struct {
	sync.Once
	path     string
	attempts int
	err      error
}

// writeBenchTimeline writes a synthetic run of n attempts: 2000 logical
// requests in flight at a time, one to four attempts each (503s with and
// without Retry-After, then 200), an outcome after each, 60 µs of run time
// between records.
func writeBenchTimeline(path string, n int) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	enc := timeline.NewEncoder(f)
	meta := &timeline.Meta{Format: timeline.Format, Recorder: "run", Scenario: "bench", Subject: "retrylab",
		Policy: &timeline.Policy{Base: int64(100 * time.Millisecond), Cap: int64(5 * time.Second), MaxAttempts: 5, Budget: int64(20 * time.Second), Jitter: "full"},
		Quota:  &timeline.Quota{Algorithm: "token-bucket", Rate: 1000},
		Phases: []timeline.Phase{{Name: "outage", Start: 0, End: int64(time.Minute), Respond: "status 503", RetryAfter: "date phase-end"}, {Name: "recovered", Start: int64(time.Minute), Respond: "quota"}}}
	if err := enc.EncodeMeta(meta); err != nil {
		return 0, err
	}
	type slot struct {
		client, seq, attempt, want int
		start                      int64
		key                        string
	}
	r := rand.New(rand.NewPCG(1, 2))
	const inflight = 2000
	slots := make([]slot, inflight)
	seq := 0
	next := func(s *slot, now int64) {
		s.client = r.IntN(10000)
		s.seq = seq
		seq++
		s.attempt, s.want, s.start = 0, 1+r.IntN(4), now
		s.key = strconv.Itoa(s.client) + "/" + strconv.Itoa(s.seq)
	}
	now := int64(0)
	for i := range slots {
		next(&slots[i], now)
	}
	written := 0
	for written < n {
		for i := range slots {
			s := &slots[i]
			now += int64(60 * time.Microsecond)
			s.attempt++
			a := timeline.Attempt{Client: strconv.Itoa(s.client), Key: s.key, Attempt: s.attempt, Method: "GET",
				Path: "/c/" + strconv.Itoa(s.client) + "/r/" + strconv.Itoa(s.seq), At: now, Done: now + int64(2*time.Millisecond),
				Status: 200, Phase: "recovered"}
			if s.attempt < s.want {
				a.Status, a.Phase = 503, "outage"
				if s.attempt%2 == 0 {
					a.RetryAfter, a.NotBefore, a.HasNotBefore = "1", a.Done+int64(time.Second), true
				}
			}
			if err := enc.EncodeAttempt(&a); err != nil {
				return 0, err
			}
			written++
			if s.attempt == s.want {
				o := timeline.Outcome{Client: a.Client, Key: s.key, Scheduled: s.start, Start: s.start, End: a.Done, Result: timeline.ResultOK, Status: 200, Attempts: s.attempt}
				if err := enc.EncodeOutcome(&o); err != nil {
					return 0, err
				}
				next(s, now)
			}
			if written == n {
				break
			}
		}
	}
	return written, enc.Flush()
}

func benchTimeline(b *testing.B) (string, int) {
	benchFile.Do(func() {
		dir, err := os.MkdirTemp("", "retrylab-bench")
		if err != nil {
			benchFile.err = err
			return
		}
		benchFile.path = filepath.Join(dir, "timeline.ndjson")
		benchFile.attempts, benchFile.err = writeBenchTimeline(benchFile.path, *benchAttempts)
	})
	if benchFile.err != nil {
		b.Fatal(benchFile.err)
	}
	return benchFile.path, benchFile.attempts
}

// TestMain removes the benchmark's temporary timeline.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchFile.path != "" {
		os.RemoveAll(filepath.Dir(benchFile.path))
	}
	os.Exit(code)
}

// peakHeap samples HeapInuse every 20 ms until stopped.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak.Load() {
			peak.Store(ms.HeapInuse)
		}
	}
	go func() {
		defer wg.Done()
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
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		sample()
		return peak.Load()
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f b.N times and reports attempts/s (wall), attempts per
// CPU-second (steady on a busy machine) and the peak heap in use.
func measure(b *testing.B, attempts int, f func()) (rate, cpuRate float64) {
	runtime.GC()
	stop := peakHeap()
	start, cpu0 := time.Now(), cpuTime()
	for range b.N {
		f()
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	peak := stop()
	n := float64(attempts) * float64(b.N)
	rate = n / wall.Seconds()
	b.ReportMetric(rate, "attempts/s")
	if cpu > 0 {
		cpuRate = n / cpu.Seconds()
		b.ReportMetric(cpuRate, "attempts/cpu-s")
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	return rate, cpuRate
}

// jsonRecord is every field of every record type, for the encoding/json
// baseline.
type jsonRecord struct {
	Type string `json:"type"`
	timeline.Attempt
	Scheduled int64  `json:"scheduled"`
	Start     any    `json:"start"`
	End       int64  `json:"end"`
	Result    string `json:"result"`
	Attempts  int    `json:"attempts"`
	Error     string `json:"error"`
	NotBefore int64  `json:"not_before"`
}

// BenchmarkAnalyzeFile measures the whole path from an NDJSON file on disk
// to a verdict, against decoding the same file with encoding/json alone in
// the same run. Metrics: attempts/s, peak-heap-MB, and on "analyze" the
// speed ratio x-encoding-json. Size the file with -bench-attempts.
func BenchmarkAnalyzeFile(b *testing.B) {
	path, attempts := benchTimeline(b)
	var baseline, baselineCPU float64
	b.Run("encoding-json", func(b *testing.B) {
		baseline, baselineCPU = measure(b, attempts, func() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			dec := json.NewDecoder(bufio.NewReaderSize(f, 256<<10))
			for {
				var rec jsonRecord
				if err := dec.Decode(&rec); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	analyze := func(b *testing.B, opts Options) {
		rate, cpuRate := measure(b, attempts, func() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			v, err := Analyze(f, opts)
			if err != nil {
				b.Fatal(err)
			}
			if v.Figures.Attempts != int64(attempts) {
				b.Fatalf("analyzed %d attempts; want %d", v.Figures.Attempts, attempts)
			}
		})
		if baseline > 0 && baselineCPU > 0 {
			b.ReportMetric(rate/baseline, "x-encoding-json")
			b.ReportMetric(cpuRate/baselineCPU, "x-encoding-json-cpu")
		}
	}
	b.Run("analyze", func(b *testing.B) { analyze(b, Options{}) })
	b.Run("analyze-serial", func(b *testing.B) { analyze(b, Options{Serial: true}) })
}

// BenchmarkAdd measures the analyzer alone on records decoded beforehand;
// BenchmarkAddOnRetry the same with an OnRetry observer that counts the
// retries (what handing out the facts costs when a report wants them).
func BenchmarkAdd(b *testing.B) { benchAdd(b, Options{}) }

func BenchmarkAddOnRetry(b *testing.B) {
	var n int64
	benchAdd(b, Options{OnRetry: func(r Retry) {
		if r.Early || r.Beyond {
			n++
		}
		n++
	}})
	if n == 0 {
		b.Fatal("no retry reported")
	}
}

func benchAdd(b *testing.B, opts Options) {
	dir := b.TempDir()
	path := filepath.Join(dir, "t.ndjson")
	if _, err := writeBenchTimeline(path, 200_000); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	dec := timeline.NewDecoder(f)
	var recs []timeline.Record
	for {
		var r timeline.Record
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, r)
	}
	b.ResetTimer()
	for range b.N {
		an := New(recs[0].Meta, opts)
		for i := 1; i < len(recs); i++ {
			an.Add(&recs[i])
		}
		an.Result()
	}
	b.ReportMetric(200_000*float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
}

// BenchmarkAddCapacity measures the capacity checks' cost: the records of
// BenchmarkAdd judged without a capacity model and with one and a trigger,
// interleaved in each iteration so that a busy machine slows both alike.
// It reports the attempts/s of each (off, on) and the speed of "on" as a
// ratio to "off" (x-off).
func BenchmarkAddCapacity(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "t.ndjson")
	if _, err := writeBenchTimeline(path, 200_000); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	dec := timeline.NewDecoder(f)
	var recs []timeline.Record
	for {
		var r timeline.Record
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
		if r.Type == timeline.TypeAttempt {
			r.Attempt.Queue, r.Attempt.Service = int64(time.Millisecond), int64(time.Millisecond)
		}
		recs = append(recs, r)
	}
	off := *recs[0].Meta
	on := off
	on.Capacity = &timeline.Capacity{Concurrency: 50, Queue: 500, Service: int64(time.Millisecond)}
	on.Phases = append([]timeline.Phase(nil), off.Phases...)
	on.Phases[0].Capacity = 0.3
	judge := func(meta *timeline.Meta) time.Duration {
		start := time.Now()
		an := New(meta, Options{})
		for i := 1; i < len(recs); i++ {
			an.Add(&recs[i])
		}
		an.Result()
		return time.Since(start)
	}
	var tOff, tOn time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			tOff += judge(&off)
			tOn += judge(&on)
		} else {
			tOn += judge(&on)
			tOff += judge(&off)
		}
	}
	n := 200_000 * float64(b.N)
	b.ReportMetric(n/tOff.Seconds(), "off-attempts/s")
	b.ReportMetric(n/tOn.Seconds(), "on-attempts/s")
	b.ReportMetric(tOff.Seconds()/tOn.Seconds(), "x-off")
}
