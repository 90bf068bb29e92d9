package forward

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Status is one forwarder's state for the operator page
// (docs/operations.md): its breaker, whether it is connected and
// consuming, the readiness problems (Readiness), and the sampled queue
// gauges: ready messages in the forward queue and the DLQ, and the
// forward queue's lag (borda_forward_queue_oldest_age_seconds; 0 when
// empty).
type Status struct {
	Breaker    BreakerStatus
	Connected  bool
	Consuming  bool
	Problems   []string
	QueueDepth int64
	DLQDepth   int64
	OldestAge  time.Duration
	// SampledAt is when QueueDepth, DLQDepth and OldestAge were sampled
	// (Options.SampleEvery apart; zero: not yet). The operator page shows
	// it: a depth sampled 14 s ago read as current beside the fresh one.
	SampledAt time.Time
	// Duplicates counts the events acked without a POST as already
	// forwarded since the worker started; LastDuplicate is the last one.
	Duplicates    int64
	LastDuplicate Duplicate
}

// Status returns the worker's current Status.
func (f *Forwarder) Status() Status {
	dups, last := f.dups.read()
	return Status{
		Duplicates:    dups,
		LastDuplicate: last,
		Breaker:       f.breaker.Status(),
		Connected:     f.connected.Load(),
		Consuming:     f.consuming.Load(),
		Problems:      f.Readiness(),
		QueueDepth:    int64(gaugeValue(f.m.queueDepth)),
		DLQDepth:      int64(gaugeValue(f.m.dlqDepth)),
		OldestAge:     time.Duration(gaugeValue(f.m.oldestAge) * float64(time.Second)),
		SampledAt:     unixNano(f.sampledAt.Load()),
	}
}

// unixNano is the time of n Unix nanoseconds; zero for 0.
func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if g.Write(&m) != nil || m.Gauge == nil {
		return 0
	}
	return m.Gauge.GetValue()
}

// breakerReason is a retryable failure's safe reason for BreakerStatus:
// failureReason and, when the endpoint answered, its reply excerpt
// (already scrubbed of the legacy URL's secrets and the HMAC secret).
func breakerReason(r Result) string {
	reason := failureReason(r)
	if ex := strings.TrimSpace(r.Excerpt); ex != "" {
		reason += ": " + ex
	}
	return reason
}
