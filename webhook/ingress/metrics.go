package ingress

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// latencyBuckets resolve the seed's SLO (p95 < 60 ms) and the 3 s confirm
// timeout.
var latencyBuckets = []float64{.001, .0025, .005, .0075, .01, .015, .02, .03, .04, .05, .06, .08, .1, .25, .5, 1, 2, 3, 5}

// ingressMetrics are the seed's webhook metrics (docs/webhooks.md §9): the one
// exception to the borda_ prefix.
type ingressMetrics struct {
	requests   *prometheus.CounterVec   // status
	latency    *prometheus.HistogramVec // type: http_total, amqp_confirm
	dedupHits  *prometheus.CounterVec   // state: IN_FLIGHT, CONFIRMED
	unroutable prometheus.Counter
	inflight   prometheus.Gauge
	failures   *prometheus.CounterVec // reason
	// authFailures: reason (missing, conflict, repeated, mismatch,
	// signature_missing, signature_invalid); authThrottled: scope (ip,
	// source).
	authFailures, authThrottled *prometheus.CounterVec
	// notConfigured: 1 per source compiled broken (source), answering
	// 503 NOT_CONFIGURED while the others are served.
	notConfigured *prometheus.GaugeVec

	// The series every event touches, looked up once on first use (not
	// created before, so /metrics shows only series that happened): a
	// label lookup hashes its values on every call.
	httpTotal, amqpConfirm lazyObserver
	byStatus               sync.Map // status → prometheus.Counter
}

// lazyObserver is one series of a HistogramVec, resolved on first use.
type lazyObserver struct {
	once sync.Once
	obs  prometheus.Observer
}

func (l *lazyObserver) get(vec *prometheus.HistogramVec, label string) prometheus.Observer {
	l.once.Do(func() { l.obs = vec.WithLabelValues(label) })
	return l.obs
}

// answered counts one answer with status.
func (m *ingressMetrics) answered(status string) {
	if c, ok := m.byStatus.Load(status); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c, _ := m.byStatus.LoadOrStore(status, m.requests.WithLabelValues(status))
	c.(prometheus.Counter).Inc()
}

func newIngressMetrics(reg prometheus.Registerer) (*ingressMetrics, error) {
	m := &ingressMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_ingress_requests_total",
			Help: "Webhook requests answered, by response status code (PUBLISHED_CONFIRMED, SERVICE_UNAVAILABLE, ...).",
		}, []string{"status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhook_ingress_latency_seconds",
			Help:    "Webhook latency in seconds: http_total (whole request) and amqp_confirm (publish to confirm).",
			Buckets: latencyBuckets,
		}, []string{"type"}),
		dedupHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_ingress_dedup_hits_total",
			Help: "Webhook requests whose event id was already known, by its state (IN_FLIGHT, CONFIRMED).",
		}, []string{"state"}),
		unroutable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhook_ingress_unroutable_total",
			Help: "Webhook events the broker returned as unroutable (answered 503).",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhook_ingress_inflight_current",
			Help: "Webhook requests being handled right now.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_webhook_publish_failures_total",
			Help: "Webhook publishes answered 503, by reason (BROKER_UNAVAILABLE, BROKER_BLOCKED, CONFIRM_TIMEOUT, NACK, UNROUTABLE_MESSAGE, FORWARD_QUEUE_MISSING, FORWARD_UNBOUND, QUEUE_MAY_DROP).",
		}, []string{"reason"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_webhook_auth_failures_total",
			Help: "Webhook requests refused authentication, by reason (missing, conflict, repeated, mismatch, signature_missing, signature_invalid, signature_repeated); throttled ones included.",
		}, []string{"reason"}),
		authThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "borda_webhook_auth_throttled_total",
			Help: "Webhook authentication failures answered 429 AUTH_THROTTLED, by the limit passed (ip, source).",
		}, []string{"scope"}),
		notConfigured: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "borda_webhook_source_not_configured",
			Help: "1 for each webhook source whose configuration cannot serve it (it answers 503 NOT_CONFIGURED; the other sources are served), by source.",
		}, []string{"source"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.dedupHits, m.unroutable, m.inflight, m.failures, m.authFailures, m.authThrottled, m.notConfigured} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering webhook ingress metrics: %w", err)
		}
	}
	return m, nil
}
