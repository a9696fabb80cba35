package stubserver

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// These tests hold the capacity model to one rule: what a request meets
// depends on the instants of events, never on the order in which the
// goroutines of one instant run. In a synctest bubble that order varies
// from run to run, so each test repeats its case with the requests
// started in several orders.

// newVirtual is a harness whose server runs as in a virtual run.
func newVirtual(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t}
	h.rec = timeline.NewRecorder(timeline.NewEncoder(&h.buf), 64)
	s, err := New(cfg, Options{Recorder: h.rec, Seed: 1, Virtual: true})
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	t.Cleanup(func() { s.Close(context.Background()) })
	return h
}

// TestCapacityTiesInOrder: six requests arrive at one instant at one
// worker with a queue of two. Whatever order their goroutines start in,
// the first by client id is served, the next two queue in that order and
// the other three are rejected.
func TestCapacityTiesInOrder(t *testing.T) {
	for _, starts := range [][]int{{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}, {3, 0, 5, 1, 4, 2}} {
		t.Run(fmt.Sprint(starts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newVirtual(t, Config{Capacity: &Capacity{Concurrency: 1, Queue: 2, Service: time.Second}})
				done := map[int]chan *httptest.ResponseRecorder{}
				for _, c := range starts {
					done[c] = h.send(RequestPath(c, 0), nil)
				}
				for c := range 6 {
					want := 200
					if c >= 3 {
						want = 503
					}
					if w := <-done[c]; w == nil || w.Code != want {
						t.Errorf("client %d answered %v; want %d", c, w, want)
					}
				}
				as := byKey(h.attempts())
				for c := range 3 {
					a := as[fmt.Sprintf("%d/0", c)]
					if want := int64(c) * int64(time.Second); a.Queue != want || a.Service != int64(time.Second) {
						t.Errorf("client %d: queue %v, service %v; want queue %v, service 1s", c, time.Duration(a.Queue), time.Duration(a.Service), time.Duration(want))
					}
				}
			})
		})
	}
}

// TestCapacityFreedAtArrival: a request arriving at the instant a service
// ends finds that worker free, with a queue of none, in a virtual run or
// not.
func TestCapacityFreedAtArrival(t *testing.T) {
	for _, virtual := range []bool{false, true} {
		t.Run(fmt.Sprint("virtual=", virtual), func(t *testing.T) {
			for i := range 10 { // the goroutines' order at the instant varies
				synctest.Test(t, func(t *testing.T) {
					cfg := Config{Capacity: &Capacity{Concurrency: 1, Service: time.Second}}
					var h *harness
					if virtual {
						h = newVirtual(t, cfg)
					} else {
						h = newHarness(t, cfg, 1)
					}
					first := h.send(RequestPath(1, 0), nil)
					time.Sleep(time.Second) // synctest: virtual time; the service's end
					if w := h.do("GET", RequestPath(2, 0)); w.Code != 200 {
						t.Errorf("try %d: a request at the instant the only worker frees: %d; want 200", i, w.Code)
					}
					<-first
					h.attempts()
				})
			}
		})
	}
}

// TestTimeoutAtServiceEnd: a client whose timeout falls at the instant
// its request's service ends has gone, in a virtual run: the record says
// abandoned every time, and the service given is wasted.
func TestTimeoutAtServiceEnd(t *testing.T) {
	for i := range 10 { // the goroutines' order at the instant varies
		synctest.Test(t, func(t *testing.T) {
			h := newVirtual(t, Config{Capacity: &Capacity{Concurrency: 1, Service: time.Second}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			<-h.send(RequestPath(1, 0), ctx)
			a := byKey(h.attempts())["1/0"]
			if a.Fault != timeline.FaultAbandoned || a.Service != int64(time.Second) {
				t.Errorf("try %d: record %+v; want abandoned after 1s of service", i, a)
			}
			if c := h.s.Counts().Capacity; c == nil || c.Wasted != time.Second {
				t.Errorf("try %d: Counts().Capacity = %+v; want 1s wasted", i, c)
			}
		})
	}
}

// TestDrawsFollowTheAttempt: a mix's draws and a Retry-After's spread
// depend on the seed and the attempt, not on the order requests arrive
// in: two servers with one seed, sent the same attempts in opposite
// orders, answer each attempt alike; another seed answers some otherwise;
// and the mix keeps its weights.
func TestDrawsFollowTheAttempt(t *testing.T) {
	cfg := Config{Phases: []Phase{{
		Respond:    Respond{Kind: RespondMix, Mix: []Weighted{{Status: 503, Weight: 3}, {Status: 200, Weight: 1}}},
		RetryAfter: RetryAfter{Form: FormDelta, Fixed: time.Second, Spread: 3 * time.Second},
	}}}
	const n = 400
	answers := func(seed int64, reverse bool) map[string]string {
		s, err := New(cfg, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for i := range n {
			c := i
			if reverse {
				c = n - 1 - i
			}
			for range 2 { // two attempts of each key
				r := httptest.NewRequest("GET", RequestPath(c, 0), nil)
				w := httptest.NewRecorder()
				s.ServeHTTP(w, r)
				got[fmt.Sprint(c)] += fmt.Sprint(w.Code, " ", w.Header().Get("Retry-After"), ";")
			}
		}
		return got
	}
	a, b, c := answers(1, false), answers(1, true), answers(2, false)
	same, n503 := 0, 0
	for k, v := range a {
		if b[k] != v {
			t.Errorf("client %s: %q in arrival order, %q in reverse; want the same answers", k, v, b[k])
		}
		if c[k] == v {
			same++
		}
		n503 += strings.Count(v, "503 ")
	}
	if same == len(a) {
		t.Errorf("seeds 1 and 2 answered all %d clients alike; want other draws", len(a))
	}
	if share := float64(n503) / (2 * n); share < 0.70 || share > 0.80 {
		t.Errorf("%.2f of the attempts got 503; want the mix's 0.75 (±0.05)", share)
	}
}

// TestHoldFromTheCap: with HoldFrom(1s), a request arriving at 1s or
// later is held unrecorded, even when its handler runs before anyone
// calls Hold; one arriving before is served.
func TestHoldFromTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, 1)
		h.s.HoldFrom(time.Second)
		time.Sleep(999 * time.Millisecond) // synctest: virtual time
		if w := h.do("GET", RequestPath(1, 0)); w.Code != 200 {
			t.Errorf("a request before the cap: %d; want 200", w.Code)
		}
		time.Sleep(time.Millisecond) // synctest: virtual time; the cap's instant
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		held := h.send(RequestPath(2, 0), ctx)
		synctest.Wait()
		select {
		case <-held:
			t.Error("a request at the cap was answered at once; want it held")
		default:
		}
		<-held // its client gives up at 1.1s
		if as := h.attempts(); len(as) != 1 || as[0].Key != "1/0" {
			t.Errorf("records %+v; want only the request before the cap", as)
		}
	})
}
