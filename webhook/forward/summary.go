package forward

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// DefaultSummaryEvery is how often RunSummary logs its line.
const DefaultSummaryEvery = time.Minute

// Totals are the forwarder's outcome counts since it started
// (borda_forward_outcomes_total summed over class).
type Totals struct {
	Delivered, Duplicates, Retried, DeadLettered, Deferred, Requeued int64
}

// Totals reads the outcome counters.
func (f *Forwarder) Totals() Totals {
	var t Totals
	for outcome, dst := range map[string]*int64{"delivered": &t.Delivered, "duplicate": &t.Duplicates, "retried": &t.Retried,
		"dead_lettered": &t.DeadLettered, "deferred": &t.Deferred, "requeued": &t.Requeued} {
		*dst = sumOutcome(f, outcome)
	}
	return t
}

func sumOutcome(f *Forwarder, outcome string) int64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { f.m.outcomes.Collect(ch); close(ch) }()
	var n float64
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == outcome {
				n += pb.GetCounter().GetValue()
			}
		}
	}
	return int64(n)
}

// RunSummary logs one line at info every every (0: DefaultSummaryEvery)
// until ctx ends: what the forwarder did in the interval (delivered,
// duplicates, retried, dead-lettered), the totals since start, and the
// breaker's state; while the breaker flaps between open and half-open
// (each transition is logged at debug only), for how long and how many
// probes it let through. Each delivery is logged at debug by the handler.
func (f *Forwarder) RunSummary(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultSummaryEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := f.Totals()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := f.Totals()
		attrs := []any{
			"every", every.String(),
			"delivered", now.Delivered - last.Delivered, "duplicates", now.Duplicates - last.Duplicates,
			"retried", now.Retried - last.Retried, "dead_lettered", now.DeadLettered - last.DeadLettered,
			"delivered_total", now.Delivered, "dead_lettered_total", now.DeadLettered,
			"breaker", f.breaker.State().String(),
		}
		if d, probes, ok := f.breaker.flapping(f.now()); ok {
			attrs = append(attrs, "breaker_open_since", d.Round(time.Second).String(), "breaker_probes", probes)
		}
		f.log.Log(ctx, slog.LevelInfo, "forward summary", attrs...)
		last = now
	}
}
