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

// benchSetup is one redis-server, a stub on it, and a Limiter of the
// same limits whose keys and arguments the raw calls of the script use.
type benchSetup struct {
	rdb  *redis.Client
	stub *stubserver.Server
	lim  *Limiter
}

// newBenchSetup starts a redis-server and a stub on it, recording to a
// file when record is set.
func newBenchSetup(b *testing.B, record bool) *benchSetup {
	b.Helper()
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 16})
	b.Cleanup(func() { rdb.Close() })
	s := &benchSetup{rdb: rdb}
	o := Options{Prefix: "bench:", Timeout: time.Second}
	var err error
	if s.lim, err = NewLimiter(rdb, o, stubserver.LimiterSpec{Limits: stubserver.Named(benchLimits)}); err != nil {
		b.Fatal(err)
	}
	s.stub = s.newStub(b, record, o)
	return s
}

// newStub is a stub on s's Redis, recording to a file when record is set.
func (s *benchSetup) newStub(b *testing.B, record bool, o Options) *stubserver.Server {
	b.Helper()
	var rec *timeline.Recorder
	if record {
		f, err := os.Create(filepath.Join(b.TempDir(), "timeline.ndjson"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		enc := timeline.NewEncoder(f)
		enc.EncodeMeta(&timeline.Meta{Format: timeline.Format, Recorder: "serve"})
		rec = timeline.NewRecorder(enc, 4096)
		b.Cleanup(func() { rec.Close() })
	}
	cfg := stubserver.Config{Headers: stubserver.HeadersIETF,
		Quota: &stubserver.Quota{Limits: benchLimits},
		Phases: []stubserver.Phase{{Name: "quota", Respond: stubserver.Respond{Kind: stubserver.RespondQuota},
			RetryAfter: stubserver.RetryAfter{Form: stubserver.FormDelta, Value: stubserver.ValueLimiter}}}}
	stub, err := stubserver.New(cfg, stubserver.Options{Recorder: rec, NewLimiter: New(s.rdb, o)})
	if err != nil {
		b.Fatal(err)
	}
	return stub
}

// handlerLoop serves request i (client i%50) through stub.
func handlerLoop(b *testing.B, stub *stubserver.Server) func(i int) {
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
		stub.ServeHTTP(w, r)
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
// layers in Redis (one EVALSHA per request) against raw EVALSHA calls of
// the same script with the same keys and arguments from Go, on one local
// redis-server. The ratio sub-benchmarks time, in one loop, alternating
// batches, from 1 caller and from 8 at once: the raw calls, the handler
// without recording, and the handler recording every attempt to a file;
// they report raw/handler time, the handler's share of the raw calls'
// throughput (target ≥ 0.8), without and with recording.
func BenchmarkRedisQuota(b *testing.B) {
	b.Run("raw-evalsha", func(b *testing.B) {
		s := newBenchSetup(b, false)
		next := s.rawLoop(b)
		for i := 0; b.Loop(); i++ {
			next(i)
		}
	})
	for _, record := range []bool{false, true} {
		name := "handler-unrecorded"
		if record {
			name = "handler-recorded"
		}
		b.Run(name, func(b *testing.B) {
			s := newBenchSetup(b, record)
			next := handlerLoop(b, s.stub)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				next(i)
			}
		})
	}
	for _, callers := range []int{1, 8} {
		b.Run("ratio-callers="+strconv.Itoa(callers), func(b *testing.B) {
			s := newBenchSetup(b, false)
			recorded := s.newStub(b, true, Options{Prefix: "bench:", Timeout: time.Second})
			loops := make([][]func(int), 3) // raw, unrecorded, recorded
			for range callers {
				loops[0] = append(loops[0], s.rawLoop(b))
				loops[1] = append(loops[1], handlerLoop(b, s.stub))
				loops[2] = append(loops[2], handlerLoop(b, recorded))
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
			var t [3]time.Duration
			for b.Loop() {
				for k := range loops {
					t[k] += run(loops[k])
				}
			}
			reqs := float64(b.N * batch * callers)
			b.ReportMetric(float64(t[0])/float64(t[1]), "ratio-unrecorded")
			b.ReportMetric(float64(t[0])/float64(t[2]), "ratio-recorded")
			b.ReportMetric(float64(t[0])/reqs, "raw-ns/req")
			b.ReportMetric(float64(t[1])/reqs, "unrecorded-ns/req")
			b.ReportMetric(float64(t[2])/reqs, "recorded-ns/req")
		})
	}
}
