package stubserver

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/internal/memnet"
	"github.com/retrylab/retrylab/timeline"
)

// send serves a request to path on its own goroutine (with ctx, nil for
// none) and returns the channel its response arrives on, nil for a
// request the server dropped unanswered (an abandoned one).
func (h *harness) send(path string, ctx context.Context) chan *httptest.ResponseRecorder {
	done := make(chan *httptest.ResponseRecorder, 1)
	r := httptest.NewRequest("GET", path, nil)
	if ctx != nil {
		r = r.WithContext(ctx)
	}
	go func() {
		w := httptest.NewRecorder()
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				panic(p)
			} else if p != nil {
				w = nil
			}
			done <- w
		}()
		h.s.ServeHTTP(w, r)
	}()
	return done
}

// byKey indexes records by their logical-request key.
func byKey(as []timeline.Attempt) map[string]timeline.Attempt {
	m := map[string]timeline.Attempt{}
	for _, a := range as {
		m[a.Key] = a
	}
	return m
}

const ms = time.Millisecond

// TestCapacityDiscipline: one worker, a service of 1s, four requests
// 1ms apart. FIFO serves them in arrival order; LIFO serves the newest
// waiting one each time a worker frees. Each record holds its time in the
// queue and its service.
func TestCapacityDiscipline(t *testing.T) {
	for _, tt := range []struct {
		discipline string
		order      []int // requests in the order they are served
	}{
		{"", []int{0, 1, 2, 3}},
		{DisciplineFIFO, []int{0, 1, 2, 3}},
		{DisciplineLIFO, []int{0, 3, 2, 1}},
	} {
		t.Run("discipline "+tt.discipline, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Capacity: &Capacity{Concurrency: 1, Queue: 10, Service: time.Second, Discipline: tt.discipline}}, 1)
				var done []chan *httptest.ResponseRecorder
				for i := range 4 {
					done = append(done, h.send(RequestPath(1, i), nil))
					time.Sleep(ms) // synctest: virtual time; distinct arrivals
				}
				for i, ch := range done {
					if w := <-ch; w == nil || w.Code != 200 {
						t.Errorf("request %d answered %v; want 200", i, w)
					}
				}
				as := byKey(h.attempts())
				for pos, i := range tt.order {
					a := as["1/"+strconv.Itoa(i)]
					at := time.Duration(i) * ms
					began := time.Duration(pos) * time.Second
					if pos == 0 {
						began = at
					}
					if a.At != int64(at) || a.Queue != int64(began-at) || a.Service != int64(time.Second) || a.Done != int64(began+time.Second) {
						t.Errorf("request %d (served %d-th): at %v queue %v service %v done %v; want at %v queue %v service 1s done %v",
							i, pos+1, time.Duration(a.At), time.Duration(a.Queue), time.Duration(a.Service), time.Duration(a.Done),
							at, began-at, began+time.Second)
					}
				}
			})
		})
	}
}

// TestCapacityQueueFull: with the worker busy and the queue full, a
// request is rejected at once with 503, the phase's Retry-After, and
// Limit "capacity"; it neither queued nor got service.
func TestCapacityQueueFull(t *testing.T) {
	for _, tt := range []struct {
		name string
		ra   RetryAfter
		want string // Retry-After; "" none
	}{
		{"no Retry-After", RetryAfter{}, ""},
		{"delta", RetryAfter{Form: FormDelta, Fixed: 2 * time.Second}, "2"},
		{"date at phase end", RetryAfter{Form: FormDate, Value: ValuePhaseEnd}, "Sat, 01 Jan 2000 00:01:00 GMT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Capacity: &Capacity{Concurrency: 1, Queue: 1, Service: time.Second},
					Phases: []Phase{{Name: "up", For: time.Minute, RetryAfter: tt.ra}, {Name: "later"}}}, 1)
				served := h.send("/c/1/r/0", nil)
				time.Sleep(ms) // synctest: virtual time
				queued := h.send("/c/1/r/1", nil)
				time.Sleep(ms) // synctest: virtual time
				w := h.do("GET", "/c/1/r/2")
				if w.Code != 503 || w.Header().Get("Retry-After") != tt.want {
					t.Errorf("third request: %d, Retry-After %q; want 503, %q", w.Code, w.Header().Get("Retry-After"), tt.want)
				}
				if c := h.s.Counts().Capacity; c == nil || c.Rejected != 1 || c.Queued != 1 || c.Busy != 1 || c.Workers != 1 {
					t.Errorf("Counts().Capacity = %+v; want 1 rejected, 1 queued, 1 busy of 1", c)
				}
				<-served
				<-queued
				a := byKey(h.attempts())["1/2"]
				if a.Status != 503 || a.Limit != timeline.LimitCapacity || a.Queue != 0 || a.Service != 0 || a.Done != a.At || a.RetryAfter != tt.want {
					t.Errorf("record %+v; want 503 at once, limit %q, no queue nor service, Retry-After %q", a, timeline.LimitCapacity, tt.want)
				}
				if st := h.s.Stats(); st.OK != 2 || st.Unavailable503 != 1 {
					t.Errorf("Stats() = %+v; want 2 OK, 1 503", st)
				}
			})
		})
	}
}

// TestCapacityNoQueue: with Queue 0 a request that finds every worker
// busy is rejected; one that finds a free worker is served.
func TestCapacityNoQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Capacity: &Capacity{Concurrency: 2, Service: time.Second}}, 1)
		a, b := h.send("/c/1/r/0", nil), h.send("/c/2/r/0", nil)
		synctest.Wait()
		if w := h.do("GET", "/c/3/r/0"); w.Code != 503 {
			t.Errorf("third request with 2 workers busy and no queue: %d; want 503", w.Code)
		}
		for _, ch := range []chan *httptest.ResponseRecorder{a, b} {
			if w := <-ch; w == nil || w.Code != 200 {
				t.Errorf("request with a free worker answered %v; want 200", w)
			}
		}
		h.attempts()
	})
}

// TestCapacityScaledByPhase: a phase at 30% runs 3 of 10 workers; the
// requests beyond them wait, and the moment the phase ends the workers
// are back and take the queue at once. Phases() carries the share.
func TestCapacityScaledByPhase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Capacity: &Capacity{Concurrency: 10, Queue: 100, Service: time.Second},
			Phases: []Phase{
				{Name: "normal", For: time.Second},
				{Name: "trigger", For: 2 * time.Second, Capacity: 0.3},
				{Name: "after"},
			}}, 1)
		if c := h.s.Counts().Capacity; c.Workers != 10 {
			t.Errorf("workers at 0 = %d; want 10", c.Workers)
		}
		time.Sleep(1500 * ms) // synctest: virtual time; into the trigger
		var done []chan *httptest.ResponseRecorder
		for i := range 10 {
			done = append(done, h.send(RequestPath(1, i), nil))
			time.Sleep(ms) // synctest: virtual time
		}
		if c := h.s.Counts().Capacity; c.Workers != 3 || c.Busy != 3 || c.Queued != 7 {
			t.Errorf("in the trigger, Counts().Capacity = %+v; want 3 workers, 3 busy, 7 queued", c)
		}
		time.Sleep(3*time.Second - 1510*ms) // synctest: virtual time; the trigger's end
		synctest.Wait()
		if c := h.s.Counts().Capacity; c.Workers != 10 || c.Busy != 7 || c.Queued != 0 {
			t.Errorf("at the trigger's end, Counts().Capacity = %+v; want 10 workers, 7 busy (3 from 2.5s, 4 from 3s), none queued", c)
		}
		for _, ch := range done {
			<-ch
		}
		as := byKey(h.attempts())
		for i := range 10 {
			at := 1500*ms + time.Duration(i)*ms
			var began time.Duration
			switch {
			case i < 3:
				began = at
			case i < 6: // when the first three finish
				began = at - 3*ms + time.Second
			default: // when the trigger ends
				began = 3 * time.Second
			}
			a := as["1/"+strconv.Itoa(i)]
			if a.Status != 200 || a.Phase != "trigger" || a.Queue != int64(began-at) || a.Service != int64(time.Second) {
				t.Errorf("request %d: %+v; want 200 in trigger, queued %v, served 1s", i, a, began-at)
			}
		}
		phases := h.s.Phases()
		if phases[0].Capacity != 0 || phases[1].Capacity != 0.3 || phases[2].Capacity != 0 {
			t.Errorf("Phases() capacities = %v, %v, %v; want 0, 0.3, 0", phases[0].Capacity, phases[1].Capacity, phases[2].Capacity)
		}
	})
}

// TestScaledWorkers: a share rounds to the nearest worker, at least 1.
func TestScaledWorkers(t *testing.T) {
	for _, tt := range []struct {
		n     int
		share float64
		want  int
	}{
		{50, 0, 50}, {50, 1, 50}, {50, 0.3, 15}, {10, 0.7, 7}, {10, 0.25, 3}, {10, 0.01, 1}, {3, 0.5, 2},
	} {
		if got := scaledWorkers(tt.n, tt.share); got != tt.want {
			t.Errorf("scaledWorkers(%d, %v) = %d; want %d", tt.n, tt.share, got, tt.want)
		}
	}
}

// TestCapacityAbandonedWhileQueued: a client that leaves while its request
// waits. With CancelOnDisconnect the request is dropped at once, unserved
// (abandoned, Service 0), and the worker goes to the next; without, it is
// served when its turn comes, and the service is wasted (abandoned,
// Service > 0). Either way a request whose client leaves during its
// service is served in full: that work is wasted too.
func TestCapacityAbandonedWhileQueued(t *testing.T) {
	for _, cancel := range []bool{true, false} {
		t.Run("cancel_on_disconnect="+strconv.FormatBool(cancel), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Capacity: &Capacity{Concurrency: 1, Queue: 5, Service: 2 * time.Second, CancelOnDisconnect: cancel}}, 1)
				ctx0, stop0 := context.WithTimeout(context.Background(), time.Second)
				defer stop0()
				first := h.send("/c/1/r/0", ctx0) // leaves during its service
				time.Sleep(ms)                    // synctest: virtual time
				ctx1, stop1 := context.WithTimeout(context.Background(), time.Second)
				defer stop1()
				leaver := h.send("/c/2/r/0", ctx1) // leaves while queued
				time.Sleep(ms)                     // synctest: virtual time
				patient := h.send("/c/3/r/0", nil)
				if w := <-first; w != nil {
					t.Errorf("client that left during service answered %d; want nothing", w.Code)
				}
				if w := <-leaver; w != nil {
					t.Errorf("client that left while queued answered %d; want nothing", w.Code)
				}
				if w := <-patient; w == nil || w.Code != 200 {
					t.Errorf("patient client answered %v; want 200", w)
				}
				c := h.s.Counts().Capacity
				as := byKey(h.attempts())
				a0, a1, a2 := as["1/0"], as["2/0"], as["3/0"]
				if a0.Fault != timeline.FaultAbandoned || a0.Status != 200 || a0.Service != int64(2*time.Second) || a0.Done != int64(2*time.Second) {
					t.Errorf("left during service: %+v; want abandoned 200 served 2s in full", a0)
				}
				var want2Queue time.Duration
				if cancel {
					// Dropped when its client left at 1.001s: no service.
					if a1.Fault != timeline.FaultAbandoned || a1.Status != 200 || a1.Queue != int64(time.Second) || a1.Service != 0 || a1.Done != int64(1001*ms) {
						t.Errorf("left while queued: %+v; want abandoned 200 dropped after 1s in the queue, no service", a1)
					}
					want2Queue = 2*time.Second - 2*ms // the worker came to it next
					if c.Dropped != 1 || c.Wasted != 2*time.Second || c.Service != 4*time.Second {
						t.Errorf("Counts().Capacity = %+v; want 1 dropped, 2s wasted of 4s", c)
					}
				} else {
					// Served from 2s to 4s for nobody.
					if a1.Fault != timeline.FaultAbandoned || a1.Status != 200 || a1.Queue != int64(2*time.Second-ms) || a1.Service != int64(2*time.Second) || a1.Done != int64(4*time.Second) {
						t.Errorf("left while queued: %+v; want abandoned 200 queued to 2s and served 2s", a1)
					}
					want2Queue = 4*time.Second - 2*ms
					if c.Dropped != 0 || c.Wasted != 4*time.Second || c.Service != 6*time.Second {
						t.Errorf("Counts().Capacity = %+v; want none dropped, 4s wasted of 6s", c)
					}
				}
				if a2.Fault != "" || a2.Status != 200 || a2.Queue != int64(want2Queue) {
					t.Errorf("patient: %+v; want 200 after %v queued", a2, want2Queue)
				}
			})
		})
	}
}

// TestCapacityGoneBeforeAWorker: with CancelOnDisconnect, a request whose
// client left before the server reached the pool (during the latency) is
// never started, even with a worker free.
func TestCapacityGoneBeforeAWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Latency: 2 * time.Second, Capacity: &Capacity{Concurrency: 1, Service: time.Second, CancelOnDisconnect: true}}, 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		<-h.send("/c/1/r/0", ctx)
		a := h.attempts()[0]
		if a.Fault != timeline.FaultAbandoned || a.Service != 0 || a.Queue != 0 || a.Done != int64(time.Second) {
			t.Errorf("record %+v; want abandoned when its client left during the latency, unserved", a)
		}
		if c := h.s.Counts().Capacity; c.Dropped != 1 || c.Service != 0 {
			t.Errorf("Counts().Capacity = %+v; want 1 dropped, no service", c)
		}
	})
}

// TestCapacityOverTheWire: over a real http.Server and Transport (the
// in-memory network, virtual time), a client whose timeout ends while its
// request is queued disconnects, and with CancelOnDisconnect the server
// drops the request at that instant.
func TestCapacityOverTheWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Capacity: &Capacity{Concurrency: 1, Queue: 5, Service: 3 * time.Second, CancelOnDisconnect: true}}, 1)
		network := memnet.New()
		l := network.Listen()
		served := make(chan error, 1)
		go func() { served <- h.s.Serve(l) }()
		tr := &http.Transport{DialContext: network.DialContext}
		get := func(path string, timeout time.Duration) (int, error) {
			c := &http.Client{Transport: tr, Timeout: timeout}
			resp, err := c.Get("http://" + l.Addr().String() + path)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		first := make(chan int, 1)
		go func() { code, _ := get("/c/1/r/0", 0); first <- code }()
		time.Sleep(ms) // synctest: virtual time
		if code, err := get("/c/2/r/0", time.Second); err == nil {
			t.Errorf("impatient client got %d; want a timeout", code)
		}
		if code := <-first; code != 200 {
			t.Errorf("first client got %d; want 200", code)
		}
		synctest.Wait()
		tr.CloseIdleConnections()
		if err := h.s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		a := byKey(h.attempts())["2/0"]
		if a.Fault != timeline.FaultAbandoned || a.Service != 0 || a.Queue != int64(time.Second) {
			t.Errorf("impatient client's record %+v; want abandoned after 1s in the queue, unserved", a)
		}
	})
}

// TestCapacityBypass: only the work of ok and quota phases takes a
// worker. A status phase answers at once with every worker busy, and a
// request the quota rejects never reaches the pool; one it allows does.
func TestCapacityBypass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{
			Quota:    &Quota{Limits: []Limit{{Limit: 1, Per: time.Hour, Key: KeyClient}}},
			Capacity: &Capacity{Concurrency: 1, Service: time.Minute},
			Phases: []Phase{
				{Name: "quota", For: time.Second, Respond: Respond{Kind: RespondQuota}},
				{Name: "down", Respond: Respond{Kind: RespondStatus, Status: 500}},
			}}, 1)
		busy := h.send("/c/1/r/0", nil)
		synctest.Wait()
		if w := h.do("GET", "/c/1/r/1"); w.Code != 429 {
			t.Errorf("second request of client 1 = %d; want 429 from the quota", w.Code)
		}
		if w := h.do("GET", "/c/2/r/0"); w.Code != 503 {
			t.Errorf("client 2, allowed by the quota, with the worker busy = %d; want 503 from capacity", w.Code)
		}
		time.Sleep(time.Second) // synctest: virtual time; into the status phase
		if w := h.do("GET", "/c/3/r/0"); w.Code != 500 {
			t.Errorf("status phase with the worker busy = %d; want its 500 at once", w.Code)
		}
		<-busy
		as := byKey(h.attempts())
		if a := as["1/1"]; a.Limit != "default" || a.Queue+a.Service != 0 {
			t.Errorf("quota rejection %+v; want limit default, no queue nor service", a)
		}
		if a := as["2/0"]; a.Limit != timeline.LimitCapacity {
			t.Errorf("capacity rejection %+v; want limit capacity", a)
		}
		if a := as["3/0"]; a.Service != 0 || a.Done != a.At {
			t.Errorf("status phase record %+v; want answered at once, no service", a)
		}
		if c := h.s.Counts().Capacity; c.Rejected != 1 || c.Service != time.Minute {
			t.Errorf("Counts().Capacity = %+v; want 1 rejected, 1m of service", c)
		}
	})
}

// TestCapacityServiceDraws: service times follow their distribution's
// mean and range, and the same seed draws the same sequence.
func TestCapacityServiceDraws(t *testing.T) {
	const n, mean = 2000, 10 * ms
	draw := func(dist string, seed int64) []time.Duration {
		var out []time.Duration
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Capacity: &Capacity{Concurrency: 1, Service: mean, Dist: dist}}, seed)
			for i := range n {
				h.do("GET", RequestPath(1, i))
			}
			for _, a := range h.attempts() {
				out = append(out, time.Duration(a.Service))
			}
		})
		return out
	}
	for _, tt := range []struct {
		dist     string
		min, max time.Duration
		sd       float64 // the distribution's standard deviation over its mean
	}{
		{DistFixed, mean, mean, 0},
		{DistExponential, 0, 50 * mean, 1},
		{DistUniform, 0, 2 * mean, 1 / math.Sqrt(3)},
	} {
		a, b, c := draw(tt.dist, 7), draw(tt.dist, 7), draw(tt.dist, 8)
		if len(a) != n {
			t.Fatalf("%s: %d records; want %d", tt.dist, len(a), n)
		}
		if !slices.Equal(a, b) {
			t.Errorf("%s: two runs with seed 7 drew different service times", tt.dist)
		}
		if tt.sd > 0 && slices.Equal(a, c) {
			t.Errorf("%s: seeds 7 and 8 drew the same service times", tt.dist)
		}
		var sum, sq float64
		for _, d := range a {
			if d < tt.min || d > tt.max {
				t.Errorf("%s: service %v outside [%v, %v]", tt.dist, d, tt.min, tt.max)
				break
			}
			x := float64(d) / float64(mean)
			sum += x
			sq += x * x
		}
		m := sum / n
		sd := math.Sqrt(sq/n - m*m)
		// Four standard errors of the mean and of the deviation.
		if tol := 4 * tt.sd / math.Sqrt(n); math.Abs(m-1) > tol+1e-9 {
			t.Errorf("%s: mean service %.3f of the mean; want 1±%.3f", tt.dist, m, tol)
		}
		if math.Abs(sd-tt.sd) > 0.1*tt.sd+1e-9 {
			t.Errorf("%s: standard deviation %.3f of the mean; want %.3f±10%%", tt.dist, sd, tt.sd)
		}
	}
}

// TestCapacityStopReleasesQueue: Seal, Close and Shutdown each release the
// queue at once (503, Limit capacity, the time queued, no service) and cut
// the service in progress short (answered as served, the service it got).
func TestCapacityStopReleasesQueue(t *testing.T) {
	for _, stop := range []string{"Seal", "Close", "Shutdown"} {
		t.Run(stop, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, Config{Capacity: &Capacity{Concurrency: 1, Queue: 5, Service: time.Hour}}, 1)
				inService := h.send("/c/1/r/0", nil)
				time.Sleep(ms) // synctest: virtual time
				q1 := h.send("/c/2/r/0", nil)
				time.Sleep(ms) // synctest: virtual time
				q2 := h.send("/c/3/r/0", nil)
				time.Sleep(time.Second) // synctest: virtual time
				began := time.Now()
				var err error
				switch stop {
				case "Seal":
					err = h.s.Seal(context.Background())
				case "Close":
					err = h.s.Close(context.Background())
				case "Shutdown":
					err = h.s.Shutdown(context.Background())
				}
				if err != nil {
					t.Fatalf("%s() = %v", stop, err)
				}
				if el := time.Since(began); el != 0 {
					t.Errorf("%s took %v; want the queue released at once", stop, el)
				}
				if w := <-inService; w == nil || w.Code != 200 {
					t.Errorf("request in service answered %v; want 200", w)
				}
				for _, ch := range []chan *httptest.ResponseRecorder{q1, q2} {
					if w := <-ch; w == nil || w.Code != 503 {
						t.Errorf("queued request answered %v; want 503", w)
					}
				}
				if c := h.s.Counts().Capacity; c.Busy != 0 || c.Queued != 0 || c.Rejected != 0 {
					t.Errorf("Counts().Capacity = %+v; want nothing busy or queued, none rejected with a full queue", c)
				}
				as := byKey(h.attempts())
				if a := as["1/0"]; a.Status != 200 || a.Service != int64(time.Second+2*ms) {
					t.Errorf("in service: %+v; want 200 with the 1.002s of service it got", a)
				}
				if a := as["2/0"]; a.Status != 503 || a.Limit != timeline.LimitCapacity || a.Queue != int64(time.Second+ms) || a.Service != 0 {
					t.Errorf("queued: %+v; want 503, limit capacity, queued 1.001s, no service", a)
				}
			})
		})
	}
}

// TestCapacityGrowsBackWithNoEvent: with nothing arriving or finishing, a
// queue left by a scaled-down phase is taken the instant the phase ends.
func TestCapacityGrowsBackWithNoEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Capacity: &Capacity{Concurrency: 2, Queue: 5, Service: time.Hour},
			Phases: []Phase{{Name: "half", For: time.Second, Capacity: 0.5}, {Name: "full", For: time.Second}, {Name: "half again", Capacity: 0.5}}}, 1)
		a := h.send("/c/1/r/0", nil)
		time.Sleep(ms) // synctest: virtual time
		b := h.send("/c/2/r/0", nil)
		time.Sleep(5 * time.Second) // synctest: virtual time
		if err := h.s.Seal(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-a
		<-b
		if q := byKey(h.attempts())["2/0"].Queue; q != int64(time.Second-ms) {
			t.Errorf("second request queued %v; want until the first phase ended (999ms)", time.Duration(q))
		}
	})
}
