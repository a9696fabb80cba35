// Package clientprom owns the Prometheus export of a client.Transport's
// events: retries, backoff waits, 429s, give-ups, the exhaustion of the
// time budget and of the retry budget, the retry budget's level, and a
// shared Limiter's fallbacks to local pacing.
package clientprom

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrylab/retrylab/client"
)

// Options name the metrics. The zero Options is ready to use.
type Options struct {
	// Namespace and Subsystem prefix every metric name (zero: "retrylab"
	// and "client", so names are retrylab_client_...).
	Namespace, Subsystem string
	// ConstLabels are added to every metric (for example the upstream's
	// name, when one process calls several).
	ConstLabels prometheus.Labels
	// Buckets are the wait histograms' buckets in seconds (nil: 1 ms to
	// about 65 s, doubling).
	Buckets []float64
}

// Observer is a client.Observer that counts a Transport's events as
// Prometheus metrics. It is also a prometheus.Collector: register it, then
// give it to client.Config.Observer. It is a client.LimiterObserver too:
// give it to a shared Limiter (clientredis.Options.Observer) to count its
// fallbacks and recoveries, and a client.RetryBudgetObserver, for the
// retry budget's level. Labels are bounded (status codes,
// reasons, sources), never the quota key or URL. Safe for concurrent use; one
// Observer may serve several Transports (then retry_budget_remaining_ratio
// is the level of the one whose budget changed last: give each Transport
// its own Observer, told apart by Options.ConstLabels, to watch each).
type Observer struct {
	client.NopObserver

	attempts   *prometheus.CounterVec   // code
	retries    *prometheus.CounterVec   // reason
	backoff    *prometheus.HistogramVec // source
	throttled  prometheus.Counter
	giveUps    *prometheus.CounterVec // reason
	budget     prometheus.Counter
	rbRefused  prometheus.Counter
	rbLevel    prometheus.Gauge
	pacingWait *prometheus.HistogramVec // source
	fallbacks  prometheus.Counter
	recoveries prometheus.Counter
	names      []string
}

var _ client.Observer = (*Observer)(nil)
var _ client.LimiterObserver = (*Observer)(nil)
var _ client.RetryBudgetObserver = (*Observer)(nil)
var _ prometheus.Collector = (*Observer)(nil)

// New returns an Observer whose metrics are named after opts.
func New(opts Options) *Observer {
	if opts.Namespace == "" {
		opts.Namespace = "retrylab"
	}
	if opts.Subsystem == "" {
		opts.Subsystem = "client"
	}
	if opts.Buckets == nil {
		opts.Buckets = prometheus.ExponentialBuckets(0.001, 2, 17)
	}
	o := &Observer{}
	name := func(n string) string {
		full := prometheus.BuildFQName(opts.Namespace, opts.Subsystem, n)
		o.names = append(o.names, full)
		return n
	}
	co := func(n, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: opts.Namespace, Subsystem: opts.Subsystem, Name: name(n), Help: help, ConstLabels: opts.ConstLabels}
	}
	ho := func(n, help string) prometheus.HistogramOpts {
		return prometheus.HistogramOpts{Namespace: opts.Namespace, Subsystem: opts.Subsystem, Name: name(n), Help: help, ConstLabels: opts.ConstLabels, Buckets: opts.Buckets}
	}
	o.attempts = prometheus.NewCounterVec(co("attempts_total", "Attempts sent, by response status code (\"error\" for transport errors)."), []string{"code"})
	o.retries = prometheus.NewCounterVec(co("retries_total", "Retries scheduled, by the failed attempt's status code or \"network\"."), []string{"reason"})
	o.backoff = prometheus.NewHistogramVec(ho("backoff_seconds", "Waits before retries, by source (retry-after or backoff)."), []string{"source"})
	o.throttled = prometheus.NewCounter(co("throttled_total", "429 responses received; divide by attempts_total for the 429 rate."))
	o.giveUps = prometheus.NewCounterVec(co("giveups_total", "Calls that failed, by reason (budget, retry-budget, attempts, canceled, not-retryable)."), []string{"reason"})
	o.budget = prometheus.NewCounter(co("budget_exhausted_total", "Calls that failed because their time budget ran out."))
	o.rbRefused = prometheus.NewCounter(co("retry_budget_exhausted_total", "Calls that failed because the Transport's retry budget refused their retry (too many retries across calls)."))
	o.rbLevel = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: opts.Namespace, Subsystem: opts.Subsystem, Name: name("retry_budget_remaining_ratio"),
		Help: "Share of the retry budget's tokens left (1 full, 0 empty) at its last change; 1 until a retry spends some, and without a retry budget.", ConstLabels: opts.ConstLabels})
	o.rbLevel.Set(1)
	o.pacingWait = prometheus.NewHistogramVec(ho("pacing_wait_seconds", "Waits imposed before attempts by the token bucket or the proactive slow-down."), []string{"source"})
	o.fallbacks = prometheus.NewCounter(co("limiter_fallbacks_total", "Times a shared Limiter lost its store (Redis) and fell back to local pacing."))
	o.recoveries = prometheus.NewCounter(co("limiter_recoveries_total", "Times a shared Limiter got its store back; fallbacks minus recoveries counts the Limiters pacing locally."))
	return o
}

// MetricNames returns the full names of the metrics, for
// client.Config.Summary.
func (o *Observer) MetricNames() []string { return append([]string(nil), o.names...) }

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.attempts, o.retries, o.backoff, o.throttled, o.giveUps, o.budget, o.rbRefused, o.rbLevel, o.pacingWait, o.fallbacks, o.recoveries}
}

// Attempt implements client.Observer.
func (o *Observer) Attempt(e client.AttemptEvent) {
	code := "error"
	if e.Err == nil {
		code = strconv.Itoa(e.Status)
	}
	o.attempts.WithLabelValues(code).Inc()
}

// Retry implements client.Observer.
func (o *Observer) Retry(e client.RetryEvent) {
	o.retries.WithLabelValues(e.Reason).Inc()
	o.backoff.WithLabelValues(string(e.Source)).Observe(e.Wait.Seconds())
}

// Throttled implements client.Observer.
func (o *Observer) Throttled(client.ThrottledEvent) { o.throttled.Inc() }

// PacingWait implements client.Observer.
func (o *Observer) PacingWait(e client.PacingEvent) {
	o.pacingWait.WithLabelValues(string(e.Source)).Observe(e.Wait.Seconds())
}

// LimiterFallback implements client.LimiterObserver.
func (o *Observer) LimiterFallback(e client.LimiterEvent) {
	if e.FellBack {
		o.fallbacks.Inc()
	} else {
		o.recoveries.Inc()
	}
}

// RetryBudget implements client.RetryBudgetObserver: it sets
// retry_budget_remaining_ratio (refusals are counted by GiveUp).
func (o *Observer) RetryBudget(e client.RetryBudgetEvent) {
	if e.Capacity > 0 {
		o.rbLevel.Set(float64(e.Tokens) / float64(e.Capacity))
	}
}

// GiveUp implements client.Observer.
func (o *Observer) GiveUp(e client.GiveUpEvent) {
	reason := "canceled"
	switch {
	case e.Err == nil:
		reason = "unknown"
	case errors.Is(e.Err.Reason, client.ErrBudgetExhausted):
		reason = "budget"
		o.budget.Inc()
	case errors.Is(e.Err.Reason, client.ErrRetryBudgetExhausted):
		reason = "retry-budget"
		o.rbRefused.Inc()
	case errors.Is(e.Err.Reason, client.ErrAttemptsExhausted):
		reason = "attempts"
	case e.Err.Reason == nil:
		reason = "not-retryable"
	}
	o.giveUps.WithLabelValues(reason).Inc()
}
