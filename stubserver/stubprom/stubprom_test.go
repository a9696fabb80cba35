package stubprom

import (
	"context"
	"errors"
	"net/http/httptest"
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
