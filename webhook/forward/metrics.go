package forward

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the forwarder's Prometheus series (borda_forward_*).
type metrics struct {
	outcomes   *prometheus.CounterVec // {outcome, class}
	attempts   prometheus.Histogram
	retries    *prometheus.CounterVec // {rung}
	postTime   prometheus.Histogram
	dlqDepth   prometheus.Gauge
	queueDepth prometheus.Gauge
	oldestAge  prometheus.Gauge
	breaker    prometheus.Gauge
	duplicates *prometheus.CounterVec // {source}
	// eventsDepth and eventsConsumers sample the events queue (none when
	// forward.events_queue is "").
	eventsDepth, eventsConsumers prometheus.Gauge

	labelsMu sync.Mutex
	sources  map[string]bool // the source label values in use
}

// maxSourceLabels bounds the distinct source label values: the source is
// message data (an envelope published by hand may carry any), so past
// this many the rest count as "other".
const maxSourceLabels = 32

// sourceLabel returns source as a label value, or "other" once
// maxSourceLabels other values are in use.
func (m *metrics) sourceLabel(source string) string {
	m.labelsMu.Lock()
	defer m.labelsMu.Unlock()
	if m.sources[source] {
		return source
	}
	if len(m.sources) >= maxSourceLabels {
		return "other"
	}
	m.sources[source] = true
	return source
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_forward_outcomes_total",
			Help: "Deliveries handled by the forwarder, by outcome (delivered, retried, dead_lettered, duplicate, deferred, requeued) and class (2xx, 4xx, 5xx, 408, 429, timeout, network, malformed, digest, breaker_open, store_error, dead, none).",
		}, []string{"outcome", "class"}),
		attempts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "borda_forward_attempts",
			Help:    "POST attempts an event took when it was finally delivered or dead-lettered.",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 8},
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_forward_retries_total",
			Help: "Deliveries republished to a retry queue, by rung (the delay as written: 1m, 5m, 15m, 60m).",
		}, []string{"rung"}),
		postTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "borda_forward_post_duration_seconds",
			Help:    "Duration of one POST to the legacy endpoint, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		dlqDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_forward_dlq_depth",
			Help: "Messages in the forwarder's dead-letter queue (sampled).",
		}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_forward_queue_depth",
			Help: "Ready messages in the forward queue (sampled).",
		}),
		oldestAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_forward_queue_oldest_age_seconds",
			Help: "Age of the message at the head of the forward queue, in seconds since the ingress received it (sampled; 0 when empty).",
		}),
		breaker: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_forward_breaker_state",
			Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
		}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_forward_duplicates_total",
			Help: "Deliveries acked without a POST because their (source, event id) idempotency key says forwarded, by source (at most 32 values, then \"other\").",
		}, []string{"source"}),
		eventsDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_forward_events_queue_depth",
			Help: "Ready messages in the events queue `borda consume-events` reads (sampled; absent when forward.events_queue is empty).",
		}),
		eventsConsumers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_forward_events_queue_consumers",
			Help: "Consumers of the events queue (sampled; 0: `borda consume-events` is not running and the queue grows).",
		}),
		sources: map[string]bool{},
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.outcomes, m.attempts, m.retries, m.postTime, m.dlqDepth, m.queueDepth, m.oldestAge, m.breaker, m.duplicates, m.eventsDepth, m.eventsConsumers} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}
