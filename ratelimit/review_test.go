package ratelimit

import (
	"context"
	"testing"
	"time"
)

// A relax factor is only bounded below (≥ 1): `borda limits relax
// --factor 1e20` ("lift it for now") overflowed floor(limit × factor) into
// a negative int64 limit, and every request of the rule was blocked.
func TestRelax_HugeFactorNeverBlocksEverything(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore(0)
	for _, algo := range []string{"fixed_window", "gcra"} {
		r := burstRule(2, 5*time.Second)
		r.Algorithm = algo
		l, _ := newTestLimiter(t, rulesConfig(r), testKS, store)
		ctx := context.Background()
		if err := Relax(ctx, store, testKS, "burst", 1e20, time.Minute); err != nil {
			t.Fatal(err)
		}
		l.pollRelax(ctx)
		s := Subject{Route: "portal", IP: "203.0.113.77"}
		for i := 1; i <= 5; i++ {
			v := l.Decide(ctx, s)
			if v.Blocked() || v.Decisions[0].Limit < 2 {
				t.Fatalf("%s: relaxed (×1e20) request %d: %s limit %d", algo, i, outcomes(v), v.Decisions[0].Limit)
			}
		}
		_ = store.WriteRelax(ctx, testKS.Relax("burst"), 1, time.Millisecond)
	}
}

// A fixed-window key found with a TTL longer than its window (the rule's
// window was shortened by a reload, or another writer set it) kept that
// TTL: the key, and the deny cache entry built from it, outlived the
// window. Every key must have 0 < TTL ≤ window.
func TestStoreConformance_FixedWindowTTLNeverExceedsWindow(t *testing.T) {
	for name, mk := range conformanceStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, ks := mk(t)
			ctx, now := context.Background(), time.Now()
			key := ks.RateLimit("burst", "203.0.113.8")
			out := make([]Count, 1)
			if err := s.Hit(ctx, now, []Hit{{Key: key, Algorithm: FixedWindow, TTL: time.Minute}}, out); err != nil {
				t.Fatal(err)
			}
			if err := s.Hit(ctx, now, []Hit{{Key: key, Algorithm: FixedWindow, TTL: 5 * time.Second}}, out); err != nil {
				t.Fatal(err)
			}
			if out[0].TTL <= 0 || out[0].TTL > 5*time.Second {
				t.Fatalf("TTL after a hit with a 5s window = %v, want in (0, 5s]", out[0].TTL)
			}
		})
	}
}

// After a reload shortens a rule's window, a subject blocked under the old
// window must not stay blocked (by the store's TTL or the deny cache)
// longer than the new window.
func TestReload_ShorterWindowNeverBlocksLongerThanIt(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore(0)
	l, _ := newTestLimiter(t, rulesConfig(burstRule(1, time.Hour)), testKS, store)
	ctx := context.Background()
	s := Subject{Route: "portal", IP: "203.0.113.66"}
	l.Decide(ctx, s)
	if err := l.Reload(rulesConfig(burstRule(1, time.Second)), testRoutes); err != nil {
		t.Fatal(err)
	}
	v := l.Decide(ctx, s)
	if !v.Blocked() {
		return // the old count was forgotten: fine
	}
	if ra := v.Decisions[0].RetryAfter; ra > time.Second {
		t.Fatalf("blocked for %v under a 1s window", ra)
	}
}
