package ratelimit

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/breaker"
	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/keyspace"
)

// slowPingStore is a countingStore whose Ping answers after delay (or
// when its context ends, with the context's error).
type slowPingStore struct {
	countingStore
	delay time.Duration
}

func (s *slowPingStore) Ping(ctx context.Context) error {
	select {
	case <-time.After(s.delay):
		return s.countingStore.Ping(ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestHalfOpenProbeWaitsAtLeast100ms: the background probe of a
// half-open store breaker waits max(timeout, 100 ms) for the store's
// PING, so a timeout of a few milliseconds (tight for decisions) does not
// keep the breaker open against a store that answers in 40 ms; a PING
// slower than the floor still fails the probe.
func TestHalfOpenProbeWaitsAtLeast100ms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		delay  time.Duration
		closed bool
	}{
		{40 * time.Millisecond, true},
		{2 * time.Second, false},
	} {
		store := &slowPingStore{countingStore: countingStore{Store: NewMemoryStore(1000)}, delay: tc.delay}
		cfg := rulesConfig(burstRule(10, time.Minute))
		cfg.Timeout = 5 * time.Millisecond
		cfg.BreakerFailures, cfg.BreakerOpenFor = 1, time.Second
		clk := clock.NewManual(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
		cfg.Clock = clk
		l, err := New(cfg, keyspace.MustNew("olp-dev:tprobe:"), store, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		store.fail.Store(true)
		l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.8"}) // opens it
		store.fail.Store(false)
		clk.Advance(cfg.BreakerOpenFor + time.Nanosecond)
		if st := l.breaker.State(); st != breaker.StateHalfOpen {
			t.Fatalf("store breaker %v after its open period, want half-open", st)
		}
		l.probe(context.Background())
		if got := l.breaker.State() == breaker.StateClosed; got != tc.closed {
			t.Errorf("a PING answering in %v: breaker %v after the probe, want closed %v", tc.delay, l.breaker.State(), tc.closed)
		}
	}
}
