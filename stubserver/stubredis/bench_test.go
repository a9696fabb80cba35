package stubredis

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/internal/redistest"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// benchLimits are three layers that always allow, so that every call
// checks and charges all three: a per-client token bucket, a global
// sliding window, a global fixed window of a day.
var benchLimits = []stubserver.Limit{
	{Name: "second", Algorithm: tb, Limit: 1e6, Per: time.Second, Burst: 1e6, Key: stubserver.KeyClient},
	{Name: "minute", Algorithm: sw, Limit: 1e9, Per: time.Minute},
	{Name: "day", Algorithm: fw, Limit: 1e9, Per: 24 * time.Hour},
}

// benchNopWriter is a reusable ResponseWriter.
type benchNopWriter struct {
	h    http.Header
	code int
}

func (w *benchNopWriter) Header() http.Header         { return w.h }
func (w *benchNopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchNopWriter) WriteHeader(code int)        { w.code = code }

// benchSetup is one redis-server, a stub on it recording to a file, and
// the same Limiter's keys and arguments for raw calls of its script.
type benchSetup struct {
	rdb  *redis.Client
	stub *stubserver.Server
	lim  *Limiter
	rec  *timeline.Recorder
}

func newBenchSetup(b *testing.B) *benchSetup {
	b.Helper()
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 16})
	b.Cleanup(func() { rdb.Close() })
	f, err := os.Create(filepath.Join(b.TempDir(), "timeline.ndjson"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	enc := timeline.NewEncoder(f)
	enc.EncodeMeta(&timeline.Meta{Format: timeline.Format, Recorder: "serve"})
	s := &benchSetup{rdb: rdb, rec: timeline.NewRecorder(enc, 4096)}
	b.Cleanup(func() { s.rec.Close() })
	cfg := stubserver.Config{Headers: stubserver.HeadersIETF,
		Quota: &stubserver.Quota{Limits: benchLimits},
		Phases: []stubserver.Phase{{Name: "quota", Respond: stubserver.Respond{Kind: stubserver.RespondQuota},
			RetryAfter: stubserver.RetryAfter{Form: stubserver.FormDelta, Value: stubserver.ValueLimiter}}}}
	o := Options{Prefix: "bench:", Timeout: time.Second}
	s.stub, err = stubserver.New(cfg, stubserver.Options{Recorder: s.rec, NewLimiter: New(rdb, o)})
	if err != nil {
		b.Fatal(err)
	}
	if s.lim, err = NewLimiter(rdb, o, stubserver.LimiterSpec{Limits: stubserver.Named(benchLimits)}); err != nil {
		b.Fatal(err)
	}
	return s
}

// handlerLoop serves request i (client i%50) through the stub.
func (s *benchSetup) handlerLoop(b *testing.B) func(i int) {
	paths := make([]string, 1000)
	for i := range paths {
		paths[i] = stubserver.RequestPath(i%50, i)
	}
	r, _ := http.NewRequest("GET", "http://stub"+paths[0], nil)
	r.RemoteAddr = "127.0.0.1:1234"
	w := &benchNopWriter{h: make(http.Header)}
	return func(i int) {
		r.URL.Path = paths[i%len(paths)]
		clear(w.h)
		s.stub.ServeHTTP(w, r)
		if w.code != 200 {
			b.Fatalf("stub answered %d; want 200", w.code)
		}
	}
}

// rawLoop runs the script as the stub's Limiter would for request i's
// charge, by EVALSHA alone: what no Redis backend can save.
func (s *benchSetup) rawLoop(b *testing.B) func(i int) {
	ctx := context.Background()
	if err := quotaScript.Load(ctx, s.rdb).Err(); err != nil {
		b.Fatal(err)
	}
	clients := make([]string, 50)
	for i := range clients {
		clients[i] = strconv.Itoa(i)
	}
	return func(i int) {
		keys := []string{s.lim.Key(0, clients[i%50]), s.lim.Key(1, ""), s.lim.Key(2, "")}
		args := make([]any, 2+len(s.lim.args))
		args[0], args[1] = "1", ""
		copy(args[2:], s.lim.args)
		v, err := quotaScript.EvalSha(ctx, s.rdb, keys, args...).Int64Slice()
		if err != nil || len(v) != 16 || v[0] != 1 {
			b.Fatalf("EVALSHA = %v, %v", v, err)
		}
	}
}

// BenchmarkRedisQuota is the stub's handler with its quota of three
// layers in Redis (one EVALSHA per request, recording on) against raw
// EVALSHA calls of the same script with the same keys and arguments from
// Go, on one local redis-server. The ratio sub-benchmarks time both in
// one loop, alternating batches, from 1 caller and from 8 at once, and
// report raw/handler time: the handler's share of the raw calls'
// throughput (target ≥ 0.8).
func BenchmarkRedisQuota(b *testing.B) {
	b.Run("raw-evalsha", func(b *testing.B) {
		s := newBenchSetup(b)
		next := s.rawLoop(b)
		for i := 0; b.Loop(); i++ {
			next(i)
		}
	})
	b.Run("handler", func(b *testing.B) {
		s := newBenchSetup(b)
		next := s.handlerLoop(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			next(i)
		}
	})
	for _, callers := range []int{1, 8} {
		b.Run("ratio-callers="+strconv.Itoa(callers), func(b *testing.B) {
			s := newBenchSetup(b)
			raws := make([]func(int), callers)
			handlers := make([]func(int), callers)
			for c := range callers {
				raws[c], handlers[c] = s.rawLoop(b), s.handlerLoop(b)
			}
			const batch = 200
			run := func(fs []func(int)) time.Duration {
				start := time.Now()
				var wg sync.WaitGroup
				for c, f := range fs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range batch {
							f(c*batch + i)
						}
					}()
				}
				wg.Wait()
				return time.Since(start)
			}
			var tRaw, tHandler time.Duration
			for b.Loop() {
				tRaw += run(raws)
				tHandler += run(handlers)
			}
			b.ReportMetric(float64(tRaw)/float64(tHandler), "throughput-ratio")
			b.ReportMetric(float64(tHandler)/float64(b.N*batch*callers), "handler-ns/req")
			b.ReportMetric(float64(tRaw)/float64(b.N*batch*callers), "raw-ns/req")
		})
	}
}
