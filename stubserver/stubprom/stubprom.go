// Package stubprom exports a stub server's counts to Prometheus, so the
// stub itself (and every harness that embeds it, retrylabtest's virtual
// runs among them) depends on no metrics library. `retrylab serve` wires
// it: stubserver.Options{Metrics: stubprom.Handler}.
//
// Exposed on GET /metrics, from a registry of the server's own:
//
//	retrylab_stub_requests_total{phase, code}  requests answered, code is the status or "reset"/"hang"/"abandoned"
//	retrylab_stub_quota_rejected_total         requests the quota denied (answered 429)
//	retrylab_stub_quota_exhausted_total        times a quota was emptied by an allowed request
//	retrylab_stub_quota_backend_errors_total   quota decisions its backend failed (Redis down or slow)
//
// The 429 rate over the last minute, and its share of all traffic:
//
//	sum(rate(retrylab_stub_requests_total{code="429"}[1m]))
//	sum(rate(retrylab_stub_requests_total{code="429"}[1m])) / sum(rate(retrylab_stub_requests_total[1m]))
package stubprom

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrylab/retrylab/stubserver"
)

// Handler serves s's counts in the Prometheus exposition format. The
// samples are made from stubserver.Server.Counts at each scrape.
func Handler(s *stubserver.Server) http.Handler {
	c := &collector{
		s: s,
		req: prometheus.NewDesc("retrylab_stub_requests_total",
			"Requests the stub answered, by phase and status code (reset, hang and abandoned for faults).",
			[]string{"phase", "code"}, nil),
		rej: prometheus.NewDesc("retrylab_stub_quota_rejected_total",
			"Requests the quota denied with 429.", nil, nil),
		exh: prometheus.NewDesc("retrylab_stub_quota_exhausted_total",
			"Quota exhaustion events: an allowed request left no room.", nil, nil),
		bkd: prometheus.NewDesc("retrylab_stub_quota_backend_errors_total",
			"Quota decisions the quota's backend failed (Redis down or slow): answered by on_error.", nil, nil),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

type collector struct {
	s                  *stubserver.Server
	req, rej, exh, bkd *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.req
	ch <- c.rej
	ch <- c.exh
	ch <- c.bkd
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counts := c.s.Counts()
	// Phases may share a name: sum them, or the registry rejects the
	// duplicate series.
	type series struct{ phase, code string }
	sums := make(map[series]uint64)
	var order []series
	for _, ph := range counts.Phases {
		for _, cc := range ph.Codes {
			k := series{ph.Name, cc.Code}
			if _, ok := sums[k]; !ok {
				order = append(order, k)
			}
			sums[k] += cc.N
		}
	}
	for _, k := range order {
		ch <- prometheus.MustNewConstMetric(c.req, prometheus.CounterValue, float64(sums[k]), k.phase, k.code)
	}
	ch <- prometheus.MustNewConstMetric(c.rej, prometheus.CounterValue, float64(counts.QuotaRejected))
	ch <- prometheus.MustNewConstMetric(c.exh, prometheus.CounterValue, float64(counts.QuotaExhausted))
	ch <- prometheus.MustNewConstMetric(c.bkd, prometheus.CounterValue, float64(counts.BackendErrors))
}
