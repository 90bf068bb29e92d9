package telemetry

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons in borda_telemetry_dropped_total{reason}.
const (
	dropQueueFull  = "queue_full"  // Record found the queue full
	dropStoreError = "store_error" // the batch's write failed
	dropStopped    = "stopped"     // Record after Stop
)

// recorderMetrics are the Recorder's Prometheus collectors.
type recorderMetrics struct {
	dropped       *prometheus.CounterVec
	queueFull     prometheus.Counter
	storeError    prometheus.Counter
	stopped       prometheus.Counter
	flushDuration prometheus.Histogram
	// invalidEndpoint and invalidEscola are
	// borda_telemetry_invalid_values_total{dimension}.
	invalidEndpoint prometheus.Counter
	invalidEscola   prometheus.Counter
	// foldedCap and foldedRefused are
	// borda_telemetry_endpoints_folded_total{reason}.
	foldedCap     prometheus.Counter
	foldedRefused prometheus.Counter
}

func newRecorderMetrics(reg prometheus.Registerer) (*recorderMetrics, error) {
	dropped, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_telemetry_dropped_total",
		Help: "Telemetry events dropped before reaching Redis, by reason (queue_full, store_error, stopped).",
	}, []string{"reason"}))
	if err != nil {
		return nil, err
	}
	flush, err := register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "borda_telemetry_flush_duration_seconds",
		Help:    "Time to write one telemetry batch (one pipelined INCRBY+EXPIRE round trip) to Redis, failures included.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	}))
	if err != nil {
		return nil, err
	}
	invalid, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_telemetry_invalid_values_total",
		Help: "Request values kept out of telemetry keys for being invalid UTF-8, holding control characters or being too long, by dimension (endpoint: counted as {route}:other; escola: not counted per school).",
	}, []string{"dimension"}))
	if err != nil {
		return nil, err
	}
	folded, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "borda_telemetry_endpoints_folded_total",
		Help: "Requests counted under a fixed endpoint template instead of their own, by reason (cap: over telemetry.max_endpoints_per_route distinct templates in the minute, counted as {route}:other; refused: a refused request (400, 403, 404, 429, 431, 503...) whose template no answered request counted that minute, counted as {route}:refused).",
	}, []string{"reason"}))
	if err != nil {
		return nil, err
	}
	return &recorderMetrics{
		foldedCap:       folded.WithLabelValues("cap"),
		foldedRefused:   folded.WithLabelValues("refused"),
		invalidEndpoint: invalid.WithLabelValues("endpoint"),
		invalidEscola:   invalid.WithLabelValues("escola"),
		dropped:         dropped,
		queueFull:       dropped.WithLabelValues(dropQueueFull),
		storeError:      dropped.WithLabelValues(dropStoreError),
		stopped:         dropped.WithLabelValues(dropStopped),
		flushDuration:   flush,
	}, nil
}

// newLastSuccess returns borda_aggregate_last_success_timestamp_seconds.
func newLastSuccess(reg prometheus.Registerer) (prometheus.Gauge, error) {
	return register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "borda_aggregate_last_success_timestamp_seconds",
		Help: "Unix time of the last aggregation of Redis telemetry counters into PostgreSQL that succeeded in this process.",
	}))
}

// register registers c on reg, or returns the collector already registered
// under the same description (two components sharing a registry share the
// series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		var zero C
		return zero, fmt.Errorf("registering telemetry metrics: %w", err)
	}
	return c, nil
}
