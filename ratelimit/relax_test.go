package ratelimit

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// TestRelax_AppliedByRunningInstanceWithinPoll: `borda limits relax` writes
// the key; a started Limiter on real Redis applies it within relax_poll.
func TestRelax_AppliedByRunningInstanceWithinPoll(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	store := NewRedisStore(testRedis(t, prefix))
	ks := keyspace.MustNew(prefix)
	cfg := rulesConfig(burstRule(10, 5*time.Second))
	cfg.RelaxPoll = 100 * time.Millisecond
	l, reg := newTestLimiter(t, cfg, ks, store)
	l.Start(context.Background())
	defer l.Stop(context.Background())
	if err := Relax(context.Background(), store, ks, "burst", 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for l.Decide(context.Background(), Subject{Route: "portal", IP: "192.0.2.9"}).Decisions[0].Limit != 30 {
		if time.Now().After(deadline) {
			t.Fatal("relax not applied within 2s with relax_poll 100ms")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if counterValue(t, reg, "borda_redis_commands_total", map[string]string{"purpose": "relax"}) < 1 {
		t.Fatal("relax polls not counted")
	}
}

// A relax factor is only bounded below (≥ 1): `borda limits relax
// --factor 1e20` ("lift it for now") overflowed floor(limit × factor) into
// a negative int64 limit, and every request of the rule was blocked.
func TestRelax_HugeFactorNeverBlocksEverything(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore(0)
	for _, algo := range []Algorithm{FixedWindow, GCRA} {
		r := burstRule(2, 5*time.Second)
		r.Algorithm = algo
		l, _ := newTestLimiter(t, rulesConfig(r), testKS, store)
		ctx := context.Background()
		// Written past Relax's own cap (by hand, or by an older binary): the
		// limiter must still cope.
		if err := store.WriteRelax(ctx, testKS.Relax("burst"), 1e20, time.Minute); err != nil {
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

// `borda limits relax --factor 1e308` was accepted: a relax may raise a
// limit, never turn a rule off.
func TestRelax_FactorAboveTheCapIsRefused(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:relaxcap:")
	for _, f := range []float64{MaxRelaxFactor + 1, 1e308, math.Inf(1)} {
		if err := Relax(context.Background(), NewMemoryStore(0), ks, "burst", f, time.Minute); !errors.Is(err, ErrBadRelax) {
			t.Errorf("Relax factor %g: err = %v, want ErrBadRelax", f, err)
		}
	}
}
