package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A relax factor never raises a GCRA rule past MaxGCRAPerMillisecond per
// millisecond of its window (fresh attack pass 26 R09: a rule of 10 000 a
// second relaxed 80 times had an interval the stored arrival time cannot
// hold, and passed 1.25 × its relaxed rate); a fixed window is raised
// whole, and a GCRA rule below the cap up to it.
func TestRelax_NeverRaisesAGCRARulePastTenAMillisecond(t *testing.T) {
	t.Parallel()
	virt := time.Date(2026, 12, 8, 2, 0, 0, 0, time.UTC)
	clock := func() time.Time { return virt }
	store := NewMemoryStore(0)
	store.SetClock(clockFunc(clock))
	opts := rulesConfig(
		Rule{Name: "fast", Scope: ScopeRoute, Algorithm: GCRA, Limit: 10_000, Window: time.Second, Routes: []string{AllRoutes}},
		Rule{Name: "slow", Scope: ScopeRoute, Algorithm: GCRA, Limit: 300, Window: time.Second, Routes: []string{AllRoutes}},
		Rule{Name: "mid", Scope: ScopeRoute, Algorithm: GCRA, Limit: 5_000, Window: time.Second, Routes: []string{AllRoutes}},
		Rule{Name: "fixed", Scope: ScopeRoute, Algorithm: FixedWindow, Limit: 10_000, Window: time.Second, Routes: []string{AllRoutes}},
	)
	l, err := New(withClock(opts, clock), testKS, store, prometheus.NewRegistry(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, rule := range []string{"fast", "slow", "mid", "fixed"} {
		if err := Relax(ctx, store, testKS, rule, 80, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	l.pollRelax(ctx)
	want := map[string]int64{"fast": 10_000, "slow": 10_000, "mid": 10_000, "fixed": 800_000}
	for _, d := range l.Decide(ctx, Subject{Route: "portal", IP: "203.0.113.9"}).Decisions {
		if d.Limit != want[d.Rule] {
			t.Errorf("%s relaxed 80 times: limit %d, want %d", d.Rule, d.Limit, want[d.Rule])
		}
	}
}
