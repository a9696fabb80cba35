package stubprom

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/stubserver"
)

func get(s *stubserver.Server, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	return w
}

// TestExposition: requests by phase and code, the quota's events, and
// phases that share a name summed into one series; /metrics itself is
// not counted.
func TestExposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := stubserver.Config{
			Quota: &stubserver.Quota{Limits: []stubserver.Limit{{Limit: 2, Per: time.Hour, Algorithm: stubserver.AlgFixedWindow}}},
			Phases: []stubserver.Phase{
				{Name: "q", For: time.Second, Respond: stubserver.Respond{Kind: stubserver.RespondQuota}},
				{Name: "down", For: time.Second, Respond: stubserver.Respond{Kind: stubserver.RespondStatus, Status: 503}},
				{Name: "up", For: time.Second},
				{Name: "down", Respond: stubserver.Respond{Kind: stubserver.RespondStatus, Status: 503}},
			}}
		s, err := stubserver.New(cfg, stubserver.Options{Metrics: Handler})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			get(s, "/c/1/r/0")
		}
		time.Sleep(time.Second) // synctest: virtual time; into the first "down"
		get(s, "/c/1/r/1")
		time.Sleep(2 * time.Second) // synctest: virtual time; into the second "down"
		get(s, "/c/1/r/2")
		get(s, "/metrics")
		w := get(s, "/metrics")
		body := w.Body.String()
		if w.Code != 200 {
			t.Fatalf("GET /metrics = %d", w.Code)
		}
		for _, want := range []string{
			`retrylab_stub_requests_total{code="200",phase="q"} 2`,
			`retrylab_stub_requests_total{code="429",phase="q"} 3`,
			`retrylab_stub_requests_total{code="503",phase="down"} 2`,
			"retrylab_stub_quota_rejected_total 3",
			"retrylab_stub_quota_exhausted_total 1",
			"retrylab_stub_quota_backend_errors_total 0",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q:\n%s", want, body)
			}
		}
		if n := s.Stats().Attempts; n != 7 {
			t.Errorf("Stats().Attempts = %d; want 7 (/metrics not counted)", n)
		}
	})
}

// failing is a quota backend that is down.
type failing struct{}

func (failing) Take(context.Context, stubserver.Charge, time.Time) (stubserver.Decision, error) {
	return stubserver.Decision{}, errors.New("down")
}

// TestBackendErrors: the quota decisions a failing backend could not make
// are exported.
func TestBackendErrors(t *testing.T) {
	cfg := stubserver.Config{
		Quota:  &stubserver.Quota{Limits: []stubserver.Limit{{Limit: 2}}, OnError: stubserver.OnErrorOpen},
		Phases: []stubserver.Phase{{Respond: stubserver.Respond{Kind: stubserver.RespondQuota}}},
	}
	s, err := stubserver.New(cfg, stubserver.Options{Metrics: Handler,
		NewLimiter: func(stubserver.LimiterSpec) (stubserver.Limiter, error) { return failing{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		get(s, "/c/1/r/0")
	}
	if body := get(s, "/metrics").Body.String(); !strings.Contains(body, "retrylab_stub_quota_backend_errors_total 3") {
		t.Errorf("metrics lack retrylab_stub_quota_backend_errors_total 3:\n%s", body)
	}
}

// TestCapacityExposition: the capacity model's gauges (workers, busy,
// queue length) and totals (rejected with the queue full, dropped, service
// and wasted seconds), read at the instant of the scrape; a stub without
// capacity exports none of them.
func TestCapacityExposition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := stubserver.Config{
			Capacity: &stubserver.Capacity{Concurrency: 4, Queue: 1, Service: 2 * time.Second, CancelOnDisconnect: true},
			Phases:   []stubserver.Phase{{Name: "trigger", For: time.Hour, Capacity: 0.5}, {Name: "after"}},
		}
		s, err := stubserver.New(cfg, stubserver.Options{Metrics: Handler})
		if err != nil {
			t.Fatal(err)
		}
		send := func(path string, ctx context.Context) chan struct{} {
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { recover() }() // an abandoned request ends by aborting the handler
				s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil).WithContext(ctx))
			}()
			return done
		}
		// Two workers in the trigger: the first leaves during its service
		// (2s wasted), the second is served; the third waits in the queue,
		// the fourth finds it full; the third's client leaves at 1s.
		gone, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var done []chan struct{}
		for i, ctx := range []context.Context{gone, context.Background(), gone} {
			done = append(done, send("/c/"+strconv.Itoa(i+1)+"/r/0", ctx))
			time.Sleep(time.Millisecond) // synctest: virtual time; distinct arrivals, in order
		}
		get(s, "/c/4/r/0")
		body := get(s, "/metrics").Body.String()
		for _, want := range []string{
			"retrylab_stub_capacity_workers 2",
			"retrylab_stub_capacity_busy 2",
			"retrylab_stub_capacity_queue_length 1",
			"retrylab_stub_capacity_rejected_total 1",
			"retrylab_stub_capacity_dropped_total 0",
		} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("metrics during the trigger lack %q:\n%s", want, body)
			}
		}
		for _, ch := range done {
			<-ch
		}
		body = get(s, "/metrics").Body.String()
		for _, want := range []string{
			"retrylab_stub_capacity_busy 0",
			"retrylab_stub_capacity_queue_length 0",
			"retrylab_stub_capacity_dropped_total 1",
			"retrylab_stub_capacity_service_seconds_total 4",
			"retrylab_stub_capacity_wasted_seconds_total 2",
			`retrylab_stub_requests_total{code="503",phase="trigger"} 1`,
			`retrylab_stub_requests_total{code="abandoned",phase="trigger"} 2`,
		} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("metrics after the requests lack %q:\n%s", want, body)
			}
		}
		time.Sleep(time.Hour) // synctest: virtual time; the trigger is over
		if body := get(s, "/metrics").Body.String(); !strings.Contains(body, "retrylab_stub_capacity_workers 4\n") {
			t.Errorf("metrics after the trigger lack the 4 workers:\n%s", body)
		}

		plain, err := stubserver.New(stubserver.Config{}, stubserver.Options{Metrics: Handler})
		if err != nil {
			t.Fatal(err)
		}
		if body := get(plain, "/metrics").Body.String(); strings.Contains(body, "capacity") {
			t.Errorf("a stub without capacity exports capacity metrics:\n%s", body)
		}
	})
}
