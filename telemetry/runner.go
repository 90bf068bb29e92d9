package telemetry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Run aggregates at once and then every interval until ctx is done, for
// `borda serve` (telemetry.aggregate_every, default 1h). It returns only
// when ctx is done.
//
// After a success {prefix}lock:aggregate:interval is set for 9/10 of
// interval, so N replicas whose timers have different phases still
// aggregate once per interval: a replica that finds it, or finds a run in
// progress ({prefix}lock:aggregate), skips its turn. The run lock is held
// only while a run lasts, so a one-shot `borda aggregate` is never turned
// away by a run that already ended. A failure (PostgreSQL
// down, gateway_metrics not migrated yet, Redis unreachable) is logged
// and retried after 15 s, doubling up to interval, with ±20 % jitter. The
// 2 h TTL of the counters bounds what a long outage loses.
func (a *Aggregator) Run(ctx context.Context, interval time.Duration) {
	hold := interval * 9 / 10
	failures := 0
	for {
		rep, err := a.aggregate(ctx, hold)
		var wait time.Duration
		switch {
		case err == nil:
			failures = 0
			wait = interval
			a.logger.Info("telemetry aggregated", "report", rep)
		case errors.Is(err, ErrLocked):
			failures = 0
			wait = interval
			a.logger.Debug("telemetry aggregation skipped: another process is aggregating now")
		case errors.Is(err, errIntervalDone):
			failures = 0
			wait = interval
			a.logger.Debug("telemetry aggregation skipped: another replica aggregated this interval")
		case ctx.Err() != nil:
			return
		default:
			failures++
			wait = backoff(a.backoffBase, interval, failures)
			if a.hint != nil {
				err = a.hint(err)
			}
			a.logger.Error("telemetry aggregation failed", "error", err, "attempt", failures, "retry_in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// backoff returns base·2^(attempt-1), capped at max, with ±20 % jitter.
func backoff(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
