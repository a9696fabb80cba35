package stubserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// benchConfig is a stub that answers every request as bareHandler does:
// 429, Retry-After: 1, the same body.
var benchConfig = Config{Phases: []Phase{{Name: "throttle",
	Respond:    Respond{Kind: RespondStatus, Status: 429},
	RetryAfter: RetryAfter{Form: FormDelta, Fixed: time.Second}}}}

// layeredConfig is a quota of three layered limits that rejects every
// request once each client has spent its first: a per-client token bucket,
// a per-client sliding window log and a global fixed window (a day), with
// IETF headers listing all three and Retry-After from the limiter.
var layeredConfig = Config{Headers: HeadersIETF,
	Quota: &Quota{Limits: []Limit{
		{Name: "second", Limit: 1, Per: time.Hour, Key: KeyClient},
		{Name: "minute", Algorithm: AlgSlidingWindowLog, Limit: 2, Per: time.Hour, Key: KeyClient},
		{Name: "day", Algorithm: AlgFixedWindow, Limit: 1e9, Per: 24 * time.Hour},
	}},
	Phases: []Phase{{Name: "quota", Respond: Respond{Kind: RespondQuota},
		RetryAfter: RetryAfter{Form: FormDelta, Value: ValueLimiter}}}}

// bareBody is the stub's 429 body.
var bareBody = []byte("429 Too Many Requests\n")

// bareHandler is the baseline: a plain net/http handler returning the
// same 429 as the stub under benchConfig.
var bareHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Retry-After", "1")
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(bareBody)
})

// benchStub returns the stub under cfg recording to a file in dir, and a
// func that shuts it down and closes the recording.
func benchStub(tb testing.TB, cfg Config, dir string) (*Server, func()) {
	f, err := os.Create(filepath.Join(dir, "timeline.ndjson"))
	if err != nil {
		tb.Fatal(err)
	}
	enc := timeline.NewEncoder(f)
	enc.EncodeMeta(&timeline.Meta{Format: timeline.Format, Recorder: "serve"})
	rec := timeline.NewRecorder(enc, 4096)
	s, err := New(cfg, Options{Recorder: rec})
	if err != nil {
		tb.Fatal(err)
	}
	return s, func() {
		s.Shutdown(context.Background())
		if err := rec.Close(); err != nil {
			tb.Error(err)
		}
		f.Close()
	}
}

// nopWriter is a reusable ResponseWriter, so the handler's own cost shows.
type nopWriter struct {
	h    http.Header
	code int
}

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(code int)        { w.code = code }

// requestLoop returns a request cycling over 1000 logical-request paths,
// a reusable writer, and a func serving the next request.
func requestLoop(h http.Handler) (w *nopWriter, next func(i int)) {
	paths := make([]string, 1000)
	for i := range paths {
		paths[i] = RequestPath(i%50, i)
	}
	r, _ := http.NewRequest("GET", "http://stub"+paths[0], nil)
	r.RemoteAddr = "127.0.0.1:1234"
	w = &nopWriter{h: make(http.Header)}
	return w, func(i int) {
		r.URL.Path = paths[i%len(paths)]
		clear(w.h)
		h.ServeHTTP(w, r)
	}
}

// BenchmarkHandler is the handler's cost per request with recording on (to
// a file), against the bare 429 handler. The ratio sub-benchmark measures
// both in the same loop, alternating batches, and reports stub/bare time
// and the allocations the stub adds.
func BenchmarkHandler(b *testing.B) {
	run := func(b *testing.B, h http.Handler) {
		w, next := requestLoop(h)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			next(i)
		}
		if w.code != 429 {
			b.Fatalf("status = %d; want 429", w.code)
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, bareHandler) })
	b.Run("stub", func(b *testing.B) {
		s, stop := benchStub(b, benchConfig, b.TempDir())
		defer stop()
		run(b, s)
	})
	// For scale, not for the ratio: a quota phase (per-client token
	// bucket, IETF headers, Retry-After from the limiter).
	b.Run("stub-quota-ietf", func(b *testing.B) {
		cfg := Config{Headers: HeadersIETF, Quota: &Quota{Limits: []Limit{{Limit: 1, Per: time.Hour, Key: KeyClient}}},
			Phases: []Phase{{Respond: Respond{Kind: RespondQuota}, RetryAfter: RetryAfter{Form: FormDelta, Value: ValueLimiter}}}}
		s, stop := benchStub(b, cfg, b.TempDir())
		defer stop()
		run(b, s)
	})
	b.Run("stub-unrecorded", func(b *testing.B) {
		s, err := New(benchConfig, Options{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, s)
	})
	b.Run("ratio", func(b *testing.B) { handlerRatio(b, benchConfig) })
	b.Run("ratio-layered", func(b *testing.B) { handlerRatio(b, layeredConfig) })
	b.Run("ratio-post", func(b *testing.B) { handlerRatioPost(b, benchConfig) })
}

// postBody is the body of the benchmarks' writes: a 256-byte order.
var postBody = []byte(`{"order":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"}`)

// handlerRatioPost is handlerRatio for writes outside the fleet's paths:
// POST /v1/orders/{n} with X-Client-Id and a 256-byte body, whose identity
// is the client, method, path and a digest of the body.
func handlerRatioPost(b *testing.B, cfg Config) {
	s, stop := benchStub(b, cfg, b.TempDir())
	defer stop()
	loop := func(h http.Handler) func(i int) {
		paths := make([]string, 1000)
		for i := range paths {
			paths[i] = "/v1/orders/" + strconv.Itoa(i)
		}
		r, _ := http.NewRequest("POST", "http://stub"+paths[0], nil)
		r.RemoteAddr = "127.0.0.1:1234"
		r.Header["X-Client-Id"] = []string{"app-1"}
		r.ContentLength = int64(len(postBody))
		br := bytes.NewReader(postBody)
		body := io.NopCloser(br)
		w := &nopWriter{h: make(http.Header)}
		return func(i int) {
			r.URL.Path = paths[i%len(paths)]
			br.Reset(postBody)
			r.Body = body
			clear(w.h)
			h.ServeHTTP(w, r)
		}
	}
	bareNext, stubNext := loop(bareHandler), loop(s)
	compareLoops(b, bareNext, stubNext)
}

// handlerRatio measures the stub under cfg and the bare handler in the same
// loop, alternating batches, and reports stub/bare time and the
// allocations the stub adds.
func handlerRatio(b *testing.B, cfg Config) {
	s, stop := benchStub(b, cfg, b.TempDir())
	defer stop()
	_, bareNext := requestLoop(bareHandler)
	_, stubNext := requestLoop(s)
	compareLoops(b, bareNext, stubNext)
}

// A loader drives one server with conns keep-alive HTTP/1.1 connections,
// dialed once, each sending requests one after another (like wrk). It is
// deliberately lean (raw TCP, a fixed request, minimal response parsing)
// so the server, not the client, is what is measured.
type loader struct {
	post  bool // POST /v1/orders/{n} with X-Client-Id and postBody, not GET /c/{i}/r/{n}
	conns []net.Conn
	brs   []*bufio.Reader
	seq   []int
}

func newLoader(tb testing.TB, addr string, conns int) *loader {
	l := &loader{}
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Minute)) // nothing hangs forever
		l.conns = append(l.conns, c)
		l.brs = append(l.brs, bufio.NewReaderSize(c, 16<<10))
		l.seq = append(l.seq, 0)
	}
	tb.Cleanup(func() {
		for _, c := range l.conns {
			c.Close()
		}
	})
	return l
}

// run sends total requests across the connections and returns the rate of
// responses.
func (l *loader) run(tb testing.TB, total int) float64 {
	var left atomic.Int64
	left.Store(int64(total))
	var wg sync.WaitGroup
	start := time.Now()
	for i, conn := range l.conns {
		wg.Go(func() {
			br := l.brs[i]
			var req []byte
			for left.Add(-1) >= 0 {
				l.seq[i]++
				if l.post {
					req = append(req[:0], "POST /v1/orders/"...)
					req = strconv.AppendInt(req, int64(l.seq[i]%500), 10)
					req = append(req, " HTTP/1.1\r\nHost: stub\r\nUser-Agent: retrylab-bench\r\nX-Client-Id: c"...)
					req = strconv.AppendInt(req, int64(i), 10)
					req = append(req, "\r\nContent-Type: application/json\r\nContent-Length: "...)
					req = strconv.AppendInt(req, int64(len(postBody)), 10)
					req = append(req, "\r\n\r\n"...)
					req = append(req, postBody...)
				} else {
					req = append(req[:0], "GET "...)
					req = append(req, RequestPath(i, l.seq[i]%500)...)
					req = append(req, " HTTP/1.1\r\nHost: stub\r\nUser-Agent: retrylab-bench\r\n\r\n"...)
				}
				if _, err := conn.Write(req); err != nil {
					tb.Error(err)
					return
				}
				if err := readResponse(br); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}

// readResponse reads one response with a Content-Length body.
func readResponse(br *bufio.Reader) error {
	length := -1
	status := true
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if status {
			// 429, or 200 for a quota's first requests.
			if len(line) < 12 || (string(line[9:12]) != "429" && string(line[9:12]) != "200") {
				return fmt.Errorf("status line %q; want 429 (or 200)", line)
			}
			status = false
			continue
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 16 && (line[0] == 'C' || line[0] == 'c') && string(line[1:15]) == "ontent-Length:" {
			length, err = strconv.Atoi(string(trimSpace(line[15:])))
			if err != nil {
				return err
			}
		}
	}
	if length < 0 {
		return fmt.Errorf("no Content-Length")
	}
	_, err := br.Discard(length)
	return err
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// serveOn runs h on a hardened http.Server on loopback (for the baseline;
// the stub uses its own Serve) and returns its address and a stop func.
func serveOn(tb testing.TB, serve func(net.Listener) error, stop func()) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go serve(l)
	tb.Cleanup(stop)
	return l.Addr().String()
}

// BenchmarkThroughput is the stub's throughput with recording on (to a
// file) over loopback, as a ratio to a bare net/http server returning the
// same 429, measured in the same run: 64 keep-alive connections per
// server, dialed once, and rounds of a bounded number of requests
// alternating bare and stub; the median round of each is reported. On a shared machine wall-clock rates are noisy, so
// it also reports the process CPU time per request (server and load
// generator together, the generator's share being the same for both) and
// its ratio, which other load on the machine does not skew.
//
// Sub-benchmarks: 429 (a status phase answering as the bare handler does),
// 429-post (the same for POSTs with a 256-byte body outside the fleet's
// paths, keyed by a digest of the body) and layered-quota (three layered limits deciding every request, almost
// all rejected with 429, RateLimit headers and Retry-After).
func BenchmarkThroughput(b *testing.B) {
	b.Run("429", func(b *testing.B) { throughput(b, benchConfig) })
	b.Run("layered-quota", func(b *testing.B) { throughput(b, layeredConfig) })
	b.Run("429-post", func(b *testing.B) { throughputOf(b, benchConfig, true) })
}

func throughput(b *testing.B, cfg Config) { throughputOf(b, cfg, false) }

// throughputOf is throughput with GETs on the fleet's paths, or (post)
// POSTs of postBody on other paths, whose identity digests the body.
func throughputOf(b *testing.B, cfg Config, post bool) {
	const conns, perRound, rounds = 64, 2500, 30
	bareSrv := &http.Server{Handler: bareHandler, ReadHeaderTimeout: ReadHeaderTimeout, MaxHeaderBytes: MaxHeaderBytes, IdleTimeout: IdleTimeout}
	bareAddr := serveOn(b, bareSrv.Serve, func() { bareSrv.Close() })
	s, stopStub := benchStub(b, cfg, b.TempDir())
	stubAddr := serveOn(b, s.Serve, stopStub)

	bareLoad, stubLoad := newLoader(b, bareAddr, conns), newLoader(b, stubAddr, conns)
	bareLoad.post, stubLoad.post = post, post
	bareLoad.run(b, perRound) // warm up
	stubLoad.run(b, perRound)
	var bare, stub, bareCPU, stubCPU []float64
	round := func(l *loader, rates, cpus *[]float64) {
		c0 := processCPU()
		*rates = append(*rates, l.run(b, perRound))
		*cpus = append(*cpus, float64(processCPU()-c0)/perRound)
	}
	b.ResetTimer()
	for range b.N {
		for range rounds {
			round(bareLoad, &bare, &bareCPU)
			round(stubLoad, &stub, &stubCPU)
		}
	}
	b.StopTimer()
	mb, ms := median(bare), median(stub)
	cb, cs := median(bareCPU), median(stubCPU)
	b.ReportMetric(mb, "bare-req/s")
	b.ReportMetric(ms, "stub-req/s")
	b.ReportMetric(ms/mb, "ratio")
	b.ReportMetric(cb, "bare-cpu-ns/req")
	b.ReportMetric(cs, "stub-cpu-ns/req")
	b.ReportMetric(cb/cs, "cpu-ratio")
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// okConfig is a stub answering every request 200, without latency.
var okConfig = Config{Phases: []Phase{{Name: "ok"}}}

// BenchmarkCapacity is the capacity model's cost per request: the stub
// with a model of ample workers (1000, a queue of 100, so no request
// waits) against the same stub without one, both recording to a file, in
// the same loop, alternating batches (and which goes first). It reports
// the CPU time per request of each (the process's, each recorder's
// goroutine included), their ratio, and the allocations the model adds.
//
// service-0: a worker is held for no time, against the plain stub: the
// model's bookkeeping alone. service-1us: a worker is held 1µs, against a
// stub whose latency waits the same 1µs, so both pay one timer: what the
// model adds to a wait (both are dominated by the runtime's cost of
// parking and waking a goroutine on a timer).
func BenchmarkCapacity(b *testing.B) {
	ample := func(service time.Duration) *Capacity {
		return &Capacity{Concurrency: 1000, Queue: 100, Service: service}
	}
	b.Run("service-0", func(b *testing.B) {
		model := okConfig
		model.Capacity = ample(0)
		capacityRatio(b, okConfig, model, 1000)
	})
	b.Run("service-1us", func(b *testing.B) {
		base := Config{Latency: time.Microsecond, Phases: okConfig.Phases}
		model := okConfig
		model.Capacity = ample(time.Microsecond)
		capacityRatio(b, base, model, 100)
	})
}

// capacityRatio measures the stub under base and under model in the same
// loop, alternating batches of batch requests, and reports the CPU time
// per request of each and model/base.
func capacityRatio(b *testing.B, base, model Config, batch int) {
	sBase, stopBase := benchStub(b, base, b.TempDir())
	defer stopBase()
	sModel, stopModel := benchStub(b, model, b.TempDir())
	defer stopModel()
	wBase, baseNext := requestLoop(sBase)
	wModel, modelNext := requestLoop(sModel)
	var cBase, cModel, tBase, tModel time.Duration
	measure := func(next func(int), c, t *time.Duration) {
		t0, c0 := time.Now(), processCPU()
		for i := range batch {
			next(i)
		}
		*c += processCPU() - c0
		*t += time.Since(t0)
	}
	var n int
	for b.Loop() {
		if n%(2*batch) == 0 {
			measure(baseNext, &cBase, &tBase)
			measure(modelNext, &cModel, &tModel)
		} else {
			measure(modelNext, &cModel, &tModel)
			measure(baseNext, &cBase, &tBase)
		}
		n += batch
	}
	if wBase.code != 200 || wModel.code != 200 {
		b.Fatalf("status = %d, %d; want 200", wBase.code, wModel.code)
	}
	if k := sModel.Counts().Capacity; k.Rejected != 0 || k.Busy != 0 {
		b.Fatalf("capacity counts %+v; want no rejection and nothing busy after the loop", k)
	}
	i, j := 0, 0
	aBase := testing.AllocsPerRun(batch, func() { baseNext(i); i++ })
	aModel := testing.AllocsPerRun(batch, func() { modelNext(j); j++ })
	b.ReportMetric(aModel-aBase, "extra-allocs/op")
	b.ReportMetric(float64(cBase)/float64(n), "base-cpu-ns/req")
	b.ReportMetric(float64(cModel)/float64(n), "model-cpu-ns/req")
	b.ReportMetric(float64(cModel)/float64(cBase), "cpu-ratio")
	b.ReportMetric(float64(tModel)/float64(tBase), "ns-ratio")
}

// compareLoops runs the bare and the stub's request loops in alternating
// batches and reports stub/bare time and the allocations the stub adds.
func compareLoops(b *testing.B, bareNext, stubNext func(int)) {
	const batch = 1000
	var tBare, tStub time.Duration
	for b.Loop() {
		t0 := time.Now()
		for i := range batch {
			bareNext(i)
		}
		t1 := time.Now()
		for i := range batch {
			stubNext(i)
		}
		tBare += t1.Sub(t0)
		tStub += time.Since(t1)
	}
	i, j := 0, 0
	aBare := testing.AllocsPerRun(batch, func() { bareNext(i); i++ })
	aStub := testing.AllocsPerRun(batch, func() { stubNext(j); j++ })
	b.ReportMetric(float64(tStub)/float64(tBare), "ns-ratio")
	b.ReportMetric(aStub-aBare, "extra-allocs/op")
}
