package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/internal/startstop/startstoptest"
	"github.com/olp-edu/borda/keyspace"
)

// TestLimiterSurvivesConcurrentStartStop: the limiter's background loops
// (relax poller, breaker probe, sync rounds) started and stopped from
// many goroutines at once (run with -race).
func TestLimiterSurvivesConcurrentStartStop(t *testing.T) {
	t.Parallel()
	for range 5 {
		cfg := rulesConfig(burstRule(10, time.Minute))
		cfg.Sync = 10 * time.Millisecond
		l, _ := newTestLimiter(t, cfg, keyspace.MustNew("olp-dev:tstress:"), NewMemoryStore(0))
		startstoptest.Stress(t, l)
	}
}

// TestLimiterStartFollowsTheLifecycleContract: a second Start is a no-op,
// a Start after Stop returns startstop.ErrStopped (and starts nothing), a
// second Stop returns nil.
func TestLimiterStartFollowsTheLifecycleContract(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(t, rulesConfig(burstRule(10, time.Minute)), keyspace.MustNew("olp-dev:tlife:"), NewMemoryStore(0))
	ctx := context.Background()
	if err := l.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := l.Start(ctx); err != nil {
		t.Fatalf("a second Start: %v, want nil", err)
	}
	if err := l.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := l.Start(ctx); !errors.Is(err, startstop.ErrStopped) {
		t.Errorf("Start after Stop = %v, want startstop.ErrStopped", err)
	}
	if err := l.Stop(ctx); err != nil {
		t.Errorf("a second Stop = %v, want nil", err)
	}
}
