package ratelimit

import (
	"context"
	"errors"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/keyspace"
)

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
			if err := hitAt(ctx, s, now, []Hit{{Key: key, Algorithm: FixedWindow, TTL: time.Minute}}, out); err != nil {
				t.Fatal(err)
			}
			if err := hitAt(ctx, s, now, []Hit{{Key: key, Algorithm: FixedWindow, TTL: 5 * time.Second}}, out); err != nil {
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
	if err := l.Reload(rulesConfig(burstRule(1, time.Second)).Rules); err != nil {
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

// A GCRA bucket filled under a long period (the rule's window was then
// shortened by a reload) refused the subject for the rest of the old
// period, and the deny cache with it: the arrival time read from the store
// must be capped at now + period, as an allowed hit never sets it further.
func TestStoreConformance_GCRANeverRefusesLongerThanPeriod(t *testing.T) {
	for name, mk := range conformanceStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, ks := mk(t)
			ctx, now := context.Background(), time.Now()
			key := ks.RateLimit("burst", "203.0.113.7")
			out := make([]Count, 1)
			long := []Hit{{Key: key, Algorithm: GCRA, Limit: 3, Period: time.Hour}}
			for range 3 {
				if err := hitAt(ctx, s, now, long, out); err != nil {
					t.Fatal(err)
				}
			}
			short := []Hit{{Key: key, Algorithm: GCRA, Limit: 1, Period: time.Second}}
			if err := hitAt(ctx, s, now, short, out); err != nil {
				t.Fatal(err)
			}
			if !out[0].Allowed && (out[0].RetryAfter <= 0 || out[0].RetryAfter > time.Second) {
				t.Fatalf("refused for %v under a 1s period", out[0].RetryAfter)
			}
			if out[0].ResetAfter > time.Second {
				t.Fatalf("ResetAfter %v under a 1s period", out[0].ResetAfter)
			}
			if rs, ok := s.(*RedisStore); ok {
				if ttl := rs.c.(interface {
					PTTL(context.Context, string) *redis.DurationCmd
				}).PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Second {
					t.Fatalf("key TTL %v, want in (0, 1s]", ttl)
				}
			}
		})
	}
}

// hangingStore ignores its context for d, as a client library stuck in a
// handshake or pool wait would.
type hangingStore struct {
	Store
	d time.Duration
}

func (s *hangingStore) Hit(context.Context, []Hit, []Count) (time.Time, error) {
	time.Sleep(s.d)
	return time.Now(), nil
}

// A store that overruns its context must not hold the request past
// rate_limits.timeout, and its goroutine ends when the store returns.
func TestDecide_StoreIgnoringContextAnswersByTimeout(t *testing.T) {
	store := &hangingStore{Store: NewMemoryStore(1), d: 300 * time.Millisecond}
	cfg := rulesConfig(burstRule(5, 5*time.Second))
	cfg.BreakerFailures = 1000
	l, _ := newTestLimiter(t, cfg, testKS, store)
	before := runtime.NumGoroutine()
	for i := range 5 {
		start := time.Now()
		v := l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.5"})
		if el := time.Since(start); el > cfg.Timeout+50*time.Millisecond {
			t.Fatalf("request %d waited %v with timeout %v", i, el, cfg.Timeout)
		}
		if v.Blocked() || v.Decisions[0].Outcome != OutcomeError {
			t.Fatalf("request %d: %s, want error (fail-open)", i, outcomes(v))
		}
	}
	if !eventuallyTrue(2*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		t.Fatalf("goroutines %d after the store returned, %d before", runtime.NumGoroutine(), before)
	}
}

func eventuallyTrue(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
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
