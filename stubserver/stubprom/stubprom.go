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
// and, for a stub with finite capacity (stubserver.Config.Capacity):
//
//	retrylab_stub_capacity_workers             workers now (the phase's share of the concurrency), gauge
//	retrylab_stub_capacity_busy                workers serving a request now, gauge
//	retrylab_stub_capacity_queue_length        requests waiting for a worker now, gauge
//	retrylab_stub_capacity_rejected_total      requests rejected with the queue full (503)
//	retrylab_stub_capacity_dropped_total       queued requests dropped because their client had gone
//	retrylab_stub_capacity_service_seconds_total  service time given
//	retrylab_stub_capacity_wasted_seconds_total   service time given to requests whose client had gone
//
// The 429 rate over the last minute, and its share of all traffic:
//
//	sum(rate(retrylab_stub_requests_total{code="429"}[1m]))
//	sum(rate(retrylab_stub_requests_total{code="429"}[1m])) / sum(rate(retrylab_stub_requests_total[1m]))
//
// The share of the workers' time wasted on clients that had gone:
//
//	rate(retrylab_stub_capacity_wasted_seconds_total[1m]) / rate(retrylab_stub_capacity_service_seconds_total[1m])
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
		workers: prometheus.NewDesc("retrylab_stub_capacity_workers",
			"Workers of the stub's finite capacity now: the current phase's share of its concurrency.", nil, nil),
		busy: prometheus.NewDesc("retrylab_stub_capacity_busy",
			"Workers serving a request now.", nil, nil),
		queue: prometheus.NewDesc("retrylab_stub_capacity_queue_length",
			"Requests waiting for a worker now.", nil, nil),
		capRej: prometheus.NewDesc("retrylab_stub_capacity_rejected_total",
			"Requests rejected with 503 because the queue was full.", nil, nil),
		dropped: prometheus.NewDesc("retrylab_stub_capacity_dropped_total",
			"Queued requests dropped unserved because their client had gone (cancel on disconnect).", nil, nil),
		service: prometheus.NewDesc("retrylab_stub_capacity_service_seconds_total",
			"Service time the workers gave, in seconds.", nil, nil),
		wasted: prometheus.NewDesc("retrylab_stub_capacity_wasted_seconds_total",
			"Service time given to requests whose client went away before the response, in seconds.", nil, nil),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

type collector struct {
	s                                *stubserver.Server
	req, rej, exh, bkd               *prometheus.Desc
	workers, busy, queue             *prometheus.Desc
	capRej, dropped, service, wasted *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.req
	ch <- c.rej
	ch <- c.exh
	ch <- c.bkd
	ch <- c.workers
	ch <- c.busy
	ch <- c.queue
	ch <- c.capRej
	ch <- c.dropped
	ch <- c.service
	ch <- c.wasted
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
	if k := counts.Capacity; k != nil {
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(k.Workers))
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.GaugeValue, float64(k.Busy))
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(k.Queued))
		ch <- prometheus.MustNewConstMetric(c.capRej, prometheus.CounterValue, float64(k.Rejected))
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(k.Dropped))
		ch <- prometheus.MustNewConstMetric(c.service, prometheus.CounterValue, k.Service.Seconds())
		ch <- prometheus.MustNewConstMetric(c.wasted, prometheus.CounterValue, k.Wasted.Seconds())
	}
}
