//go:build unix

package runner

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkControlMounted compares, in the same run, serve's handling of
// client requests with the control API mounted (the front: the prefix
// check, then the current recording's stub) and without it (the stub
// alone). Each iteration makes one Serving of each kind and hands them
// rounds of 2,000 requests from two goroutines straight through the
// handler (via=handler, no sockets: only the handling is measured), the two sides
// alternating which goes first; each round gives a ratio with/without of
// the wall time and of the process's CPU time (the recording goroutine's
// work included), and the reported ratios are the medians over the rounds,
// so a machine whose load drifts (shared CI, other jobs) weighs on both
// sides of a pair alike. via=loopback sends the requests over loopback
// HTTP instead (Serve on 127.0.0.1, one keep-alive client a goroutine),
// rounds of 500. output=file records as serve -o does (to a
// file-like writer that discards); output=memory is serve without -o:
// without the API nothing is recorded, with it the recording is kept in
// memory.
//
//	go test -run '^$' -bench BenchmarkControlMounted -benchtime 10x ./runner
func BenchmarkControlMounted(b *testing.B) {
	for _, mode := range []struct {
		out      string
		loopback bool
		same     bool // both sides without the API: the method's own noise
	}{{"file", false, false}, {"file", false, true}, {"memory", false, false}, {"file", true, false}, {"memory", true, false}} {
		via := "handler"
		if mode.loopback {
			via = "loopback"
		}
		if mode.same {
			via += "/both-without"
		}
		rounds, perRound := 10, 2000
		if mode.loopback {
			perRound = 500
		}
		out := mode.out
		b.Run("output="+out+"/via="+via, func(b *testing.B) {
			var wall, cpu []float64
			var reqs [2]float64
			var dur [2]time.Duration
			made := 0
			for b.Loop() {
				var sides [2]*benchSide
				made++
				for j := range sides {
					i := (j + made) % 2 // which is made first alternates too
					sides[i] = newBenchSide(b, out == "file", i == 1 && !mode.same, mode.loopback, rounds*perRound)
				}
				for r := range rounds {
					var w, c [2]time.Duration
					for i := range 2 {
						side := (r + i) % 2
						w[side], c[side] = sides[side].serve(r*perRound, perRound)
					}
					wall = append(wall, float64(w[0])/float64(w[1]))
					cpu = append(cpu, float64(c[0])/float64(c[1]))
					for i := range 2 {
						dur[i] += w[i]
						reqs[i] += float64(perRound)
					}
				}
				for _, s := range sides {
					s.stop(b)
				}
			}
			b.ReportMetric(reqs[0]/dur[0].Seconds(), "req/s-without")
			b.ReportMetric(reqs[1]/dur[1].Seconds(), "req/s-with")
			b.ReportMetric(median(wall), "wall-ratio")
			b.ReportMetric(median(cpu), "cpu-ratio")
		})
	}
}

// median is xs's median (xs is sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// A benchSide is one Serving of BenchmarkControlMounted with its requests.
type benchSide struct {
	sv   *Serving
	h    http.Handler
	reqs []*http.Request // reused in turn: a request the server just parsed is in cache
	n    int             // requests to answer
	// Over loopback: the base URL, the clients, and Serve's end.
	base    string
	clients [2]*http.Client
	cancel  context.CancelFunc
	served  chan error
}

func newBenchSide(b *testing.B, file, control, loopback bool, n int) *benchSide {
	opts := ServeOptions{}
	if file {
		opts.Record = discardFile{}
	}
	if control {
		opts.Control = &ControlOptions{}
	}
	sv, err := NewServe(mustParse(b, ctlScenario), opts)
	if err != nil {
		b.Fatal(err)
	}
	s := &benchSide{sv: sv, h: sv.httpSrv.Handler, reqs: make([]*http.Request, 256), n: n}
	for i := range s.reqs {
		s.reqs[i] = httptest.NewRequest("GET", "/c/"+strconv.Itoa(i%64)+"/r/"+strconv.Itoa(i), nil)
		s.reqs[i].RemoteAddr = "127.0.0.1:1"
	}
	if loopback {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		s.base = "http://" + ln.Addr().String()
		var ctx context.Context
		ctx, s.cancel = context.WithCancel(context.Background())
		s.served = make(chan error, 1)
		go func() {
			_, err := sv.Serve(ctx, ln)
			s.served <- err
		}()
		for i := range s.clients {
			s.clients[i] = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}
		}
	}
	return s
}

// serve hands requests [from, from+n) to the handler from two goroutines;
// it returns the wall time and the process's CPU time they took.
func (s *benchSide) serve(from, n int) (wall, cpu time.Duration) {
	cpu0, start := cpuTime(), time.Now()
	var wg sync.WaitGroup
	for g := range 2 {
		if s.base != "" {
			wg.Go(func() {
				for i := from + g; i < from+n; i += 2 {
					resp, err := s.clients[g].Get(s.base + s.reqs[i%len(s.reqs)].URL.Path)
					if err != nil {
						panic(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			continue
		}
		wg.Go(func() {
			w := &nullWriter{h: http.Header{}}
			for i := from + g; i < from+n; i += 2 {
				clear(w.h)
				s.h.ServeHTTP(w, s.reqs[i%len(s.reqs)])
			}
		})
	}
	wg.Wait()
	if rec := s.sv.cur.Load().rec; rec != nil {
		rec.Sync() // the recording's work is the side's
	}
	return time.Since(start), cpuTime() - cpu0
}

func (s *benchSide) stop(b *testing.B) {
	if st := s.sv.Stub().Stats(); st.Unavailable503 != int64(s.n) {
		b.Fatalf("%d answered 503; want %d", st.Unavailable503, s.n)
	}
	if s.base != "" {
		for _, c := range s.clients {
			c.CloseIdleConnections()
		}
		s.cancel()
		if err := <-s.served; err != nil {
			b.Fatal(err)
		}
		return
	}
	if _, err := s.sv.stop(context.Background(), time.Now(), nil); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardFile is a recording file that keeps nothing.
type discardFile struct{}

func (discardFile) Write(p []byte) (int, error)           { return len(p), nil }
func (discardFile) ReadAt(p []byte, _ int64) (int, error) { clear(p); return len(p), nil }

// nullWriter is a ResponseWriter that keeps only the header.
type nullWriter struct{ h http.Header }

func (w *nullWriter) Header() http.Header         { return w.h }
func (w *nullWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nullWriter) WriteHeader(int)             {}
