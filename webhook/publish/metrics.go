package publish

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// publisherMetrics describe the publishing connection.
type publisherMetrics struct {
	connected  prometheus.Gauge
	blocked    prometheus.Gauge
	reconnects prometheus.Counter
	// queueMissing is 1 while Options.CheckQueue does not exist.
	queueMissing prometheus.Gauge
	// unbound is 1 while the forward queue's binding cannot be asserted.
	unbound prometheus.Gauge
	// declareFailed is 1 while the last topology declare failed.
	declareFailed prometheus.Gauge
	// retired counts channels replaced after a broker nack (S04).
	retired prometheus.Counter
}

// newPublisherMetrics registers the metrics; unconfirmed and unguarded
// are read at each scrape (unguarded: queues kept with the previous
// release's arguments, without x-overflow: reject-publish, and those
// Options.Guard names).
func newPublisherMetrics(reg prometheus.Registerer, unconfirmed, unguarded, stale func() float64) (*publisherMetrics, error) {
	m := &publisherMetrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_webhook_broker_connected",
			Help: "1 while the webhook publisher has a connection and channels to RabbitMQ.",
		}),
		blocked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_webhook_broker_blocked",
			Help: "1 while RabbitMQ blocks the publishing connection (memory or disk alarm).",
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "borda_webhook_broker_reconnects_total",
			Help: "Publishing connections lost after being established.",
		}),
		queueMissing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_webhook_forward_queue_missing",
			Help: "1 while the forward queue does not exist (a passive declare every second answers 404); publishes to it answer 503 FORWARD_QUEUE_MISSING.",
		}),
		unbound: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_webhook_forward_unbound",
			Help: "1 while the forward queue's binding to the webhook exchange cannot be asserted (queue.bind, every second, refused); publishes to it answer 503 FORWARD_UNBOUND.",
		}),
		declareFailed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "borda_webhook_topology_declare_failed",
			Help: "1 while the webhook publisher's last topology declare failed (e.g. ACCESS_REFUSED without the configure permission); /readyz/webhook says so.",
		}),
		retired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "borda_webhook_publish_channels_replaced_total",
			Help: "Publishing channels replaced after a broker nack (at most one per confirm_timeout): RabbitMQ 3.10 may keep a quorum queue's reject-publish state on a channel after the queue has room again.",
		}),
	}
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "borda_webhook_publish_unconfirmed",
		Help: "Publishes awaiting the broker's confirm.",
	}, unconfirmed)
	unguardedQueues := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "borda_webhook_queues_unguarded",
		Help: "Queues that can drop confirmed events at a length limit: kept with an earlier release's arguments, without x-overflow: reject-publish (docs/upgrading.md), or whose effective overflow a broker policy sets to drop-head (read from the management API, amqp.management_url; docs/reliability.md).",
	}, unguarded)
	staleQueues := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "borda_webhook_queue_guard_stale",
		Help: "Queues whose effective settings the queue guard (amqp.management_url) has not read again for three read intervals: it decides on old ones, and a drop-head policy set since is not seen (docs/reliability.md).",
	}, stale)
	for _, c := range []prometheus.Collector{m.connected, m.blocked, m.reconnects, m.queueMissing, m.unbound, m.declareFailed, m.retired, pending, unguardedQueues, staleQueues} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering webhook publisher metrics: %w", err)
		}
	}
	return m, nil
}
