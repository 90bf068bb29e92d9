package ratelimit

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/breaker"
	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// TestStoreBreakerFlappingIsLoggedOnceThenSummarized: during a Redis
// outage the store breaker goes open → half-open → open every open_for
// (2 s), and each change was a warn line (about 60 a minute). Now the
// first open and the close are warned, the close with how long it was
// open and how many probes it took; the changes between are at debug.
func TestStoreBreakerFlappingIsLoggedOnceThenSummarized(t *testing.T) {
	var logs servicetest.LogBuffer
	store := &countingStore{Store: NewMemoryStore(1000)}
	store.fail.Store(true)
	cfg := rulesConfig(burstRule(10, time.Minute))
	cfg.BreakerFailures, cfg.BreakerOpenFor = 1, time.Second
	clk := clock.NewManual(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	cfg.Clock = clk // the open period ends when the test advances it
	// Not a MemoryStore to the limiter (countingStore), so the breaker
	// guards it; not Started, so the half-open breaker lets one request
	// through as the probe.
	l, err := New(cfg, keyspace.MustNew("olp-dev:tbreakerlog:"), store, prometheus.NewRegistry(),
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	s := Subject{Route: "portal", IP: "203.0.113.7"}
	waitHalfOpen := func() {
		t.Helper()
		if st := l.breaker.State(); st != breaker.StateOpen {
			t.Fatalf("store breaker %v before its open period ended, want open", st)
		}
		clk.Advance(cfg.BreakerOpenFor + time.Nanosecond)
		if st := l.breaker.State(); st != breaker.StateHalfOpen {
			t.Fatalf("store breaker %v after its open period, want half-open", st)
		}
	}
	const probes = 8
	l.Decide(context.Background(), s) // opens it
	for range probes {
		waitHalfOpen()
		l.Decide(context.Background(), s) // the probe fails: open again
	}
	store.fail.Store(false)
	waitHalfOpen()
	l.Decide(context.Background(), s) // the probe passes: closed
	if got := l.breaker.State(); got != breaker.StateClosed {
		t.Fatalf("breaker %v after a good probe, want closed", got)
	}
	out := logs.String()
	breakerLines := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "rate-limit store breaker") {
			breakerLines++
		}
	}
	if breakerLines != 2 || !strings.Contains(out, `msg="rate-limit store breaker opened`) ||
		!strings.Contains(out, `msg="rate-limit store breaker closed: decisions resume" component=ratelimit open_for=`) || !strings.Contains(out, "probes=9") {
		t.Errorf("%d breaker lines at warn, want 2 (opened; closed with open_for and probes=9):\n%s", breakerLines, out)
	}
}

// A failing store is warned about at most once a second, on the
// Limiter's clock: the first failure, not the next within the second,
// again once the second has passed.
func TestStoreFailureIsWarnedOnceASecond(t *testing.T) {
	t.Parallel()
	var logs servicetest.LogBuffer
	store := &countingStore{Store: NewMemoryStore(1000)}
	store.fail.Store(true)
	cfg := rulesConfig(burstRule(10, time.Minute))
	cfg.BreakerFailures = 100 // the breaker stays closed: every call reaches the store
	clk := clock.NewManual(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	cfg.Clock = clk
	l, err := New(cfg, keyspace.MustNew("olp-dev:twarnonce:"), store, prometheus.NewRegistry(),
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	warned := func() int { return strings.Count(logs.String(), "rate-limit store failed; failing open") }
	s := Subject{Route: "portal", IP: "203.0.113.7"}
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{{0, 1}, {0, 1}, {999 * time.Millisecond, 1}, {time.Millisecond, 2}, {500 * time.Millisecond, 2}} {
		clk.Advance(step.advance)
		l.Decide(context.Background(), s)
		if got := warned(); got != step.want {
			t.Fatalf("after %v more: %d warnings, want %d:\n%s", step.advance, got, step.want, logs.String())
		}
	}
}
