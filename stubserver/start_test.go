package stubserver

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// TestStartOnFirstRequest: with StartOnFirstRequest the phase clock and
// time zero start at the first recorded request, however late the fleet
// comes; /healthz and /metrics do not start it; OpenRecorder is called
// once, with time zero, before the first record.
func TestStartOnFirstRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &harness{t: t}
		rec := timeline.NewRecorder(timeline.NewEncoder(&h.buf), 64)
		var opened []time.Time
		cfg := Config{Phases: []Phase{
			{Name: "outage", For: 5 * time.Second, Respond: Respond{Kind: RespondStatus, Status: 503}},
			{Name: "recovered"},
		}}
		s, err := New(cfg, Options{StartOnFirstRequest: true, Start: time.Now(), OpenRecorder: func(start time.Time) *timeline.Recorder {
			opened = append(opened, start)
			return rec
		}})
		if err != nil {
			t.Fatal(err)
		}
		h.s, h.rec = s, rec
		time.Sleep(30 * time.Second) // synctest: virtual time; the fleet is slow to start
		h.do("GET", "/healthz")
		h.do("GET", "/metrics")
		if _, ok := s.Started(); ok || len(opened) != 0 {
			t.Fatalf("clock started by /healthz or /metrics (opened %v)", opened)
		}
		time.Sleep(17 * time.Second) // synctest: virtual time
		t0 := time.Now()
		steps := []struct {
			at     time.Duration
			status int
		}{{0, 503}, {4999 * time.Millisecond, 503}, {5 * time.Second, 200}}
		for _, st := range steps {
			time.Sleep(st.at - time.Since(t0)) // synctest: virtual time
			if w := h.do("GET", "/c/1/r/0"); w.Code != st.status {
				t.Errorf("%v after the first request: %d; want %d", st.at, w.Code, st.status)
			}
		}
		if got, ok := s.Started(); !ok || !got.Equal(t0) || len(opened) != 1 || !opened[0].Equal(t0) {
			t.Errorf("Started() = %v, %v; OpenRecorder calls %v; want the first request's arrival %v, once", got, ok, opened, t0)
		}
		if got := s.Begin(t0.Add(time.Hour)); !got.Equal(t0) {
			t.Errorf("Begin after the start = %v; want the start kept, %v", got, t0)
		}
		as := h.attempts()
		if len(as) != len(steps) {
			t.Fatalf("records = %d; want %d", len(as), len(steps))
		}
		for i, a := range as {
			if a.At != int64(steps[i].at) {
				t.Errorf("record %d at %v; want %v (since the first request)", i, time.Duration(a.At), steps[i].at)
			}
		}
	})
}

// TestStartOnFirstRequestConcurrent: requests racing to be first start the
// clock once, and every one is recorded after it.
func TestStartOnFirstRequestConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &harness{t: t}
		var mu sync.Mutex
		opens := 0
		s, err := New(Config{}, Options{StartOnFirstRequest: true, OpenRecorder: func(time.Time) *timeline.Recorder {
			mu.Lock()
			defer mu.Unlock()
			opens++
			return timeline.NewRecorder(timeline.NewEncoder(&h.buf), 64)
		}})
		if err != nil {
			t.Fatal(err)
		}
		h.s = s
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() { h.do("GET", "/c/1/r/0") })
		}
		wg.Wait()
		if opens != 1 {
			t.Fatalf("OpenRecorder called %d times; want 1", opens)
		}
		h.rec = s.rec
		if as := h.attempts(); len(as) != 20 {
			t.Errorf("records = %d; want 20", len(as))
		}
	})
}

// TestStartInTheFuture: with time zero ahead (an epoch shared with other
// processes), a request that arrives early waits for it and is recorded
// at time zero; one whose client leaves first is not recorded.
func TestStartInTheFuture(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &harness{t: t}
		h.rec = timeline.NewRecorder(timeline.NewEncoder(&h.buf), 64)
		epoch := time.Now().Add(3 * time.Second)
		s, err := New(Config{Phases: []Phase{
			{Name: "outage", For: 5 * time.Second, Respond: Respond{Kind: RespondStatus, Status: 503}},
			{Name: "recovered"},
		}}, Options{Start: epoch, Recorder: h.rec})
		if err != nil {
			t.Fatal(err)
		}
		h.s = s
		if w := h.do("GET", "/healthz"); w.Code != 200 {
			t.Errorf("/healthz before the epoch: %d; want 200 at once", w.Code)
		}
		// A client that gives up before the epoch.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r := httptest.NewRequestWithContext(ctx, "GET", "/c/2/r/0", nil)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		cancel()
		if w.Code != 503 || time.Until(epoch) != 2*time.Second {
			t.Errorf("request abandoned before the epoch: %d, %v before it; want 503 after its 1 s timeout", w.Code, time.Until(epoch))
		}
		time.Sleep(time.Second) // synctest: virtual time; 1 s before the epoch
		if w := h.do("GET", "/c/1/r/0"); w.Code != 503 {
			t.Errorf("early request: %d; want the first phase's 503", w.Code)
		}
		if !time.Now().Equal(epoch) {
			t.Errorf("early request answered %v after the epoch; want at it", time.Since(epoch))
		}
		as := h.attempts()
		if len(as) != 1 || as[0].Client != "1" || as[0].At != 0 || as[0].Phase != "outage" {
			t.Errorf("records %+v; want client 1's alone, at 0 in the outage", as)
		}
	})
}
