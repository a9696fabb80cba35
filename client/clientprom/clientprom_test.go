package clientprom

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrylab/retrylab/client"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestObserverCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := New(Options{})
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(obs)
		n := 0
		next := rtFunc(func(*http.Request) (*http.Response, error) {
			n++
			h := http.Header{}
			code := 429
			if n == 1 {
				h.Set("Retry-After", "2")
			} else if n == 3 {
				h.Set("Retry-After", "3600") // past the budget: give up
				code = 503
			}
			return &http.Response{StatusCode: code, Header: h, Body: http.NoBody}, nil
		})
		tr := client.New(next, client.Config{Observer: obs})
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
		if _, err := tr.RoundTrip(req); err == nil {
			t.Fatal("RoundTrip succeeded; want a budget failure")
		}
		want := `
# HELP retrylab_client_attempts_total Attempts sent, by response status code ("error" for transport errors).
# TYPE retrylab_client_attempts_total counter
retrylab_client_attempts_total{code="429"} 2
retrylab_client_attempts_total{code="503"} 1
# HELP retrylab_client_budget_exhausted_total Calls that failed because their time budget ran out.
# TYPE retrylab_client_budget_exhausted_total counter
retrylab_client_budget_exhausted_total 1
# HELP retrylab_client_giveups_total Calls that failed, by reason (budget, retry-budget, attempts, canceled, not-retryable).
# TYPE retrylab_client_giveups_total counter
retrylab_client_giveups_total{reason="budget"} 1
# HELP retrylab_client_retries_total Retries scheduled, by the failed attempt's status code or "network".
# TYPE retrylab_client_retries_total counter
retrylab_client_retries_total{reason="429"} 2
# HELP retrylab_client_throttled_total 429 responses received; divide by attempts_total for the 429 rate.
# TYPE retrylab_client_throttled_total counter
retrylab_client_throttled_total 2
`
		names := []string{"retrylab_client_attempts_total", "retrylab_client_budget_exhausted_total",
			"retrylab_client_giveups_total", "retrylab_client_retries_total", "retrylab_client_throttled_total"}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
			t.Error(err)
		}
		if c := testutil.CollectAndCount(obs, "retrylab_client_backoff_seconds"); c != 2 {
			t.Errorf("backoff_seconds series = %d; want 2 (retry-after and backoff)", c)
		}
	})
}

func TestPacingAndSummary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := New(Options{Namespace: "app", Subsystem: "github"})
		next := rtFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
		})
		cfg := client.Config{Observer: obs, Rate: 1, Burst: 1}
		tr := client.New(next, cfg)
		for range 3 {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
			if _, err := tr.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		}
		if c := testutil.CollectAndCount(obs, "app_github_pacing_wait_seconds"); c != 1 {
			t.Errorf("pacing_wait_seconds series = %d; want 1 (bucket)", c)
		}
		s := cfg.Summary()
		if !strings.Contains(s, "metrics: app_github_attempts_total, app_github_retries_total, app_github_backoff_seconds") {
			t.Errorf("Summary() does not list the metrics:\n%s", s)
		}
	})
}

// TestLimiterFallback: a shared Limiter's fallbacks and recoveries are
// counted.
func TestLimiterFallback(t *testing.T) {
	obs := New(Options{})
	var lo client.LimiterObserver = obs
	lo.LimiterFallback(client.LimiterEvent{Key: "api.test", FellBack: true, Rate: 25})
	lo.LimiterFallback(client.LimiterEvent{Key: "api.test"})
	lo.LimiterFallback(client.LimiterEvent{Key: "api.test", FellBack: true, Rate: 25})
	want := `
# HELP retrylab_client_limiter_fallbacks_total Times a shared Limiter lost its store (Redis) and fell back to local pacing.
# TYPE retrylab_client_limiter_fallbacks_total counter
retrylab_client_limiter_fallbacks_total 2
# HELP retrylab_client_limiter_recoveries_total Times a shared Limiter got its store back; fallbacks minus recoveries counts the Limiters pacing locally.
# TYPE retrylab_client_limiter_recoveries_total counter
retrylab_client_limiter_recoveries_total 1
`
	if err := testutil.CollectAndCompare(obs, strings.NewReader(want), "retrylab_client_limiter_fallbacks_total", "retrylab_client_limiter_recoveries_total"); err != nil {
		t.Error(err)
	}
}

// TestRetryBudgetMetrics: a call the retry budget refuses is counted, by
// reason too, and the gauge follows the budget's level: 1 at first, down
// as retries spend it, up as successes give back.
func TestRetryBudgetMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := New(Options{})
		fail := true
		next := rtFunc(func(*http.Request) (*http.Response, error) {
			code := 200
			if fail {
				code = 503
			}
			return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}, nil
		})
		tr := client.New(next, client.Config{Observer: obs, RetryBudget: client.RetryBudget{Capacity: 10, RetryCost: 4, Refund: 2}})
		if got := testutil.ToFloat64(obs.rbLevel); got != 1 {
			t.Errorf("retry_budget_remaining_ratio before any call = %v; want 1", got)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, client.ErrRetryBudgetExhausted) {
			t.Fatalf("RoundTrip = %v; want ErrRetryBudgetExhausted (two retries of 4, then 2 left)", err)
		}
		want := `
# HELP retrylab_client_giveups_total Calls that failed, by reason (budget, retry-budget, attempts, canceled, not-retryable).
# TYPE retrylab_client_giveups_total counter
retrylab_client_giveups_total{reason="retry-budget"} 1
# HELP retrylab_client_retry_budget_exhausted_total Calls that failed because the Transport's retry budget refused their retry (too many retries across calls).
# TYPE retrylab_client_retry_budget_exhausted_total counter
retrylab_client_retry_budget_exhausted_total 1
# HELP retrylab_client_retry_budget_remaining_ratio Share of the retry budget's tokens left (1 full, 0 empty) at its last change; 1 until a retry spends some, and without a retry budget.
# TYPE retrylab_client_retry_budget_remaining_ratio gauge
retrylab_client_retry_budget_remaining_ratio 0.2
`
		if err := testutil.CollectAndCompare(obs, strings.NewReader(want), "retrylab_client_giveups_total",
			"retrylab_client_retry_budget_exhausted_total", "retrylab_client_retry_budget_remaining_ratio"); err != nil {
			t.Error(err)
		}
		fail = false
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := testutil.ToFloat64(obs.rbLevel); got != 0.4 {
			t.Errorf("retry_budget_remaining_ratio after a first-attempt success = %v; want 0.4 (2 + 2 of 10)", got)
		}
		if s := (client.Config{Observer: obs}).Summary(); !strings.Contains(s, "retrylab_client_retry_budget_exhausted_total, retrylab_client_retry_budget_remaining_ratio") {
			t.Errorf("Summary() does not list the retry budget's metrics:\n%s", s)
		}
	})
}
