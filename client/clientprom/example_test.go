package clientprom_test

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientprom"
)

// Register the Observer, then give it to the Transport's Config.
func Example() {
	obs := clientprom.New(clientprom.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)

	cfg := client.Config{Observer: obs, Quota: 100}
	hc := &http.Client{Transport: client.New(nil, cfg)}
	_ = hc // hc.Get(...) now counts retries, waits and 429s

	for _, name := range obs.MetricNames() {
		fmt.Println(name)
	}
	// Output:
	// retrylab_client_attempts_total
	// retrylab_client_retries_total
	// retrylab_client_backoff_seconds
	// retrylab_client_throttled_total
	// retrylab_client_giveups_total
	// retrylab_client_budget_exhausted_total
	// retrylab_client_retry_budget_exhausted_total
	// retrylab_client_retry_budget_remaining_ratio
	// retrylab_client_pacing_wait_seconds
	// retrylab_client_limiter_fallbacks_total
	// retrylab_client_limiter_recoveries_total
}
