package stubserver

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrylab/retrylab/timeline"
)

// Metric codes beyond HTTP statuses.
const (
	codeReset = 600 + iota
	codeHang
	codeAbandoned
	numCodes
)

// metrics counts with plain atomics on the request path and turns the
// counts into Prometheus samples only when scraped, so a request pays one
// atomic add. Each Server has its own registry.
//
// Exposed (on GET /metrics):
//
//	retrylab_stub_requests_total{phase, code}  requests answered, code is the status or "reset"/"hang"/"abandoned"
//	retrylab_stub_quota_rejected_total         requests the quota denied (answered 429)
//	retrylab_stub_quota_exhausted_total        times a quota was emptied by an allowed request
//
// The 429 rate over the last minute, and its share of all traffic:
//
//	sum(rate(retrylab_stub_requests_total{code="429"}[1m]))
//	sum(rate(retrylab_stub_requests_total{code="429"}[1m])) / sum(rate(retrylab_stub_requests_total[1m]))
type metrics struct {
	s              *Server
	byCode         [][numCodes]atomic.Uint64 // per phase
	quotaRejected  atomic.Uint64
	quotaExhausted atomic.Uint64
	handler        http.Handler

	reqDesc, rejDesc, exhDesc *prometheus.Desc
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		s:      s,
		byCode: make([][numCodes]atomic.Uint64, len(s.phases)),
		reqDesc: prometheus.NewDesc("retrylab_stub_requests_total",
			"Requests the stub answered, by phase and status code (reset, hang and abandoned for faults).",
			[]string{"phase", "code"}, nil),
		rejDesc: prometheus.NewDesc("retrylab_stub_quota_rejected_total",
			"Requests the quota denied with 429.", nil, nil),
		exhDesc: prometheus.NewDesc("retrylab_stub_quota_exhausted_total",
			"Quota exhaustion events: an allowed request left no room.", nil, nil),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) count(phase, code int) {
	if code >= 0 && code < numCodes {
		m.byCode[phase][code].Add(1)
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.reqDesc
	ch <- m.rejDesc
	ch <- m.exhDesc
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	// Phases may share a name: sum them, or the registry rejects the
	// duplicate series.
	type series struct{ phase, code string }
	sums := make(map[series]uint64)
	var order []series
	for pi := range m.byCode {
		name := m.s.phases[pi].Name
		for code := range m.byCode[pi] {
			n := m.byCode[pi][code].Load()
			if n == 0 {
				continue
			}
			label := strconv.Itoa(code)
			switch code {
			case codeReset:
				label = FaultReset
			case codeHang:
				label = FaultHang
			case codeAbandoned:
				label = timeline.FaultAbandoned
			}
			k := series{name, label}
			if _, ok := sums[k]; !ok {
				order = append(order, k)
			}
			sums[k] += n
		}
	}
	for _, k := range order {
		ch <- prometheus.MustNewConstMetric(m.reqDesc, prometheus.CounterValue, float64(sums[k]), k.phase, k.code)
	}
	ch <- prometheus.MustNewConstMetric(m.rejDesc, prometheus.CounterValue, float64(m.quotaRejected.Load()))
	ch <- prometheus.MustNewConstMetric(m.exhDesc, prometheus.CounterValue, float64(m.quotaExhausted.Load()))
}
