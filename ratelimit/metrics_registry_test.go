package ratelimit

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/keyspace"
)

// Two Limiters on one registry (a reload that builds a new Limiter
// before the old one is gone, two listeners' limiters) share its
// collectors: the second New does not fail on the first's metrics, and
// both count into the same ones.
func TestTwoLimitersOnOneRegistryShareTheirMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var ls []*Limiter
	for range 2 {
		l, err := New(rulesConfig(burstRule(10, time.Minute)), keyspace.MustNew("olp-dev:tsharedreg:"), NewMemoryStore(1000), reg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("a second Limiter on the same registry: %v", err)
		}
		ls = append(ls, l)
	}
	if ls[0].m.decisions != ls[1].m.decisions || ls[0].m.commands != ls[1].m.commands || ls[0].m.storeDuration != ls[1].m.storeDuration {
		t.Error("the second Limiter registered collectors of its own instead of sharing the registry's")
	}
}
