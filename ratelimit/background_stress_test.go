package ratelimit

import (
	"testing"
	"time"

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
