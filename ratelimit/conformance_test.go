package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/redis/go-redis/v9"
)

// storeUnderTest builds a fresh store and a keyspace unique to the test.
type storeUnderTest func(t *testing.T) (Store, keyspace.Keyspace)

func conformanceStores() map[string]storeUnderTest {
	return map[string]storeUnderTest{
		"memory": func(t *testing.T) (Store, keyspace.Keyspace) {
			return NewMemoryStore(0), keyspace.MustNew(servicetest.KeyPrefix(t))
		},
		"go-redis": func(t *testing.T) (Store, keyspace.Keyspace) {
			prefix := servicetest.KeyPrefix(t)
			return NewRedisStore(testRedis(t, prefix)), keyspace.MustNew(prefix)
		},
		// A private three-master Redis Cluster: one request's keys fall in
		// different slots, each its own EVALSHA in one pipeline per node.
		"go-redis-cluster": func(t *testing.T) (Store, keyspace.Keyspace) {
			prefix := servicetest.KeyPrefix(t)
			return NewRedisStore(testRedisCluster(t, prefix)), keyspace.MustNew(prefix)
		},
		"upstash-rest": func(t *testing.T) (Store, keyspace.Keyspace) {
			prefix := servicetest.KeyPrefix(t)
			srv := upstashtest.Start(testRedis(t, prefix), "test-token")
			t.Cleanup(srv.Close)
			s, err := NewRESTStore(srv.URL, "test-token", nil)
			if err != nil {
				t.Fatal(err)
			}
			return s, keyspace.MustNew(prefix)
		},
	}
}

// TestStoreConformance runs the same suite against every store: memory,
// go-redis on one server and on a Redis Cluster, and Upstash REST.
func TestStoreConformance(t *testing.T) {
	for name, mk := range conformanceStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Run("FixedWindowCountsAndSetsTTLOnFirstHit", func(t *testing.T) {
				s, ks := mk(t)
				ctx, now := context.Background(), time.Now()
				h := []Hit{{Key: ks.RateLimit("burst", "203.0.113.9"), Algorithm: FixedWindow, TTL: 5 * time.Second}}
				out := make([]Count, 1)
				for want := int64(1); want <= 3; want++ {
					if err := hitAt(ctx, s, now, h, out); err != nil {
						t.Fatal(err)
					}
					if out[0].N != want {
						t.Fatalf("hit %d: N = %d", want, out[0].N)
					}
					if out[0].TTL <= 0 || out[0].TTL > 5*time.Second {
						t.Fatalf("hit %d: TTL = %v, want in (0, 5s]", want, out[0].TTL)
					}
				}
			})
			// A reload may switch a rule between gcra and fixed_window under
			// the same name, so the same key: the store must not fail (a
			// failing script fails every rule of the request and feeds the
			// breaker), and the new algorithm starts afresh.
			t.Run("AlgorithmChangeOnReloadDoesNotFail", func(t *testing.T) {
				s, ks := mk(t)
				ctx, now := context.Background(), time.Now()
				key := ks.RateLimit("switch", "203.0.113.20")
				out := make([]Count, 1)
				gcra := []Hit{{Key: key, Algorithm: GCRA, Limit: 5, Period: 5 * time.Second}}
				fixed := []Hit{{Key: key, Algorithm: FixedWindow, TTL: 5 * time.Second}}
				if err := hitAt(ctx, s, now, gcra, out); err != nil || !out[0].Allowed {
					t.Fatalf("gcra hit: %v %+v", err, out[0])
				}
				if err := hitAt(ctx, s, now, fixed, out); err != nil {
					t.Fatalf("fixed_window hit on a gcra key: %v", err)
				}
				if out[0].N < 1 || out[0].TTL <= 0 || out[0].TTL > 5*time.Second {
					t.Fatalf("fixed_window after gcra: %+v", out[0])
				}
				if err := hitAt(ctx, s, now, gcra, out); err != nil || !out[0].Allowed {
					t.Fatalf("gcra hit on a fixed_window key: %v %+v", err, out[0])
				}
			})
			// limit 1e9 per second: the new arrival time is under 1 ms
			// ahead, and SET ... PX 0 is an error (every rule of the call
			// then failed open).
			t.Run("GCRAWithAVeryHighLimitStillAnswers", func(t *testing.T) {
				s, ks := mk(t)
				out := make([]Count, 1)
				h := []Hit{{Key: ks.RateLimit("huge", "203.0.113.21"), Algorithm: GCRA, Limit: 1e9, Period: time.Second}}
				if err := storeHit(context.Background(), s, h, out); err != nil || !out[0].Allowed {
					t.Fatalf("gcra 1e9/s: %v %+v", err, out[0])
				}
			})
			t.Run("FixedWindowExpires", func(t *testing.T) {
				s, ks := mk(t)
				ctx := context.Background()
				h := []Hit{{Key: ks.RateLimit("burst", "198.51.100.1"), Algorithm: FixedWindow, TTL: 100 * time.Millisecond}}
				out := make([]Count, 1)
				now := time.Now()
				_ = hitAt(ctx, s, now, h, out)
				if err := hitAt(ctx, s, now, h, out); err != nil || out[0].N != 2 || out[0].TTL <= 0 || out[0].TTL > 100*time.Millisecond {
					t.Fatalf("2nd hit: %v N %d TTL %v, want N 2 and 0 < TTL ≤ 100ms", err, out[0].N, out[0].TTL)
				}
				// The embedded store expires on its clock (stepped past the
				// TTL here); Redis on its own: wait for it, with a deadline.
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if err := hitAt(ctx, s, now.Add(150*time.Millisecond), h, out); err != nil {
						t.Fatal(err)
					}
					if out[0].N == 1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("5s after a 100ms TTL N = %d, want 1", out[0].N)
					}
				}
			})
			t.Run("ManyKeysOneCall", func(t *testing.T) {
				s, ks := mk(t)
				ctx, now := context.Background(), time.Now()
				hits := []Hit{
					{Key: ks.RateLimit("burst", "192.0.2.1"), Algorithm: FixedWindow, TTL: 5 * time.Second},
					{Key: ks.RateLimitAt("api", "u-1", now.Truncate(time.Minute)), Algorithm: FixedWindow, TTL: 2 * time.Minute},
					{Key: ks.RateLimit("g", "192.0.2.1"), Algorithm: GCRA, Limit: 10, Period: time.Second},
				}
				out := make([]Count, 3)
				_ = hitAt(ctx, s, now, hits[:1], out[:1])
				if err := hitAt(ctx, s, now, hits, out); err != nil {
					t.Fatal(err)
				}
				if out[0].N != 2 || out[1].N != 1 {
					t.Fatalf("counts = %d, %d; want 2, 1", out[0].N, out[1].N)
				}
				if out[1].TTL <= time.Minute || out[1].TTL > 2*time.Minute {
					t.Fatalf("aligned key TTL = %v, want in (1m, 2m]", out[1].TTL)
				}
				if !out[2].Allowed || out[2].Remaining != 9 {
					t.Fatalf("gcra = %+v, want allowed with 9 remaining", out[2])
				}
			})
			t.Run("GCRA", func(t *testing.T) {
				s, ks := mk(t)
				ctx, now := context.Background(), time.Now()
				h := []Hit{{Key: ks.RateLimit("g", "192.0.2.7"), Algorithm: GCRA, Limit: 3, Period: 3 * time.Second}}
				out := make([]Count, 1)
				for want := int64(2); want >= 0; want-- {
					if err := hitAt(ctx, s, now, h, out); err != nil {
						t.Fatal(err)
					}
					if !out[0].Allowed || out[0].Remaining != want || out[0].RetryAfter != 0 {
						t.Fatalf("remaining %d: got %+v", want, out[0])
					}
					if out[0].ResetAfter <= 0 || out[0].ResetAfter > 3*time.Second {
						t.Fatalf("ResetAfter = %v, want in (0, 3s]", out[0].ResetAfter)
					}
				}
				if err := hitAt(ctx, s, now, h, out); err != nil {
					t.Fatal(err)
				}
				if out[0].Allowed || out[0].RetryAfter != time.Second {
					t.Fatalf("4th: got %+v, want denied with RetryAfter 1s", out[0])
				}
				if err := hitAt(ctx, s, now.Add(time.Second), h, out); err != nil {
					t.Fatal(err)
				}
				if !out[0].Allowed || out[0].Remaining != 0 {
					t.Fatalf("after 1s: got %+v, want allowed, 0 remaining", out[0])
				}
			})
			// The weighted two-window counter on the store's clock (pinned
			// here): limit 4 per 10 s, 5 s into a window.
			t.Run("SlidingWindow", func(t *testing.T) {
				s, ks := mk(t)
				ctx := context.Background()
				start := time.UnixMilli(1_764_580_000_000) // a multiple of 10 s
				key := ks.RateLimit("sw", "192.0.2.8")
				h := []Hit{{Key: key, Algorithm: SlidingWindow, Limit: 4, Period: 10 * time.Second}}
				out := make([]Count, 1)
				at := start.Add(5 * time.Second)
				for want := int64(3); want >= 0; want-- {
					if err := hitAt(ctx, s, at, h, out); err != nil {
						t.Fatal(err)
					}
					if !out[0].Allowed || out[0].Remaining != want || out[0].ResetAfter != 15*time.Second {
						t.Fatalf("remaining %d: got %+v (ResetAfter: to the end of the next window, 15s)", want, out[0])
					}
				}
				// full: the next window, where the 4 weigh 4 × (1 − y/10 s),
				// lets one more pass at y = 2.5 s: 5 s + 2.5 s from now
				if err := hitAt(ctx, s, at, h, out); err != nil {
					t.Fatal(err)
				}
				if out[0].Allowed || out[0].RetryAfter != 7500*time.Millisecond || out[0].ResetAfter != 15*time.Second {
					t.Fatalf("5th: got %+v, want refused, RetryAfter 7.5s, ResetAfter 15s", out[0])
				}
				at = at.Add(7500 * time.Millisecond)
				if err := hitAt(ctx, s, at, h, out); err != nil {
					t.Fatal(err)
				}
				if !out[0].Allowed || out[0].Remaining != 0 {
					t.Fatalf("after 7.5s: got %+v, want allowed, 0 remaining", out[0])
				}
				// rate 4 × 0.75 + 1 = 4: the previous window's weight must
				// fall to 2, at 5 s into this window: 2.5 s from now
				if err := hitAt(ctx, s, at, h, out); err != nil {
					t.Fatal(err)
				}
				if out[0].Allowed || out[0].RetryAfter != 2500*time.Millisecond {
					t.Fatalf("then: got %+v, want refused, RetryAfter 2.5s", out[0])
				}
				// two windows of silence: the rate is back to 0
				at = at.Add(20 * time.Second)
				if err := hitAt(ctx, s, at, h, out); err != nil {
					t.Fatal(err)
				}
				if !out[0].Allowed || out[0].Remaining != 3 {
					t.Fatalf("after 20s: got %+v, want allowed, 3 remaining", out[0])
				}
			})
			// sliding_window ↔ fixed_window ↔ gcra under one name on a
			// reload: no store error, the new algorithm starts afresh.
			t.Run("SlidingWindowAlgorithmChangeDoesNotFail", func(t *testing.T) {
				s, ks := mk(t)
				ctx := context.Background()
				key := ks.RateLimit("switch", "203.0.113.22")
				out := make([]Count, 1)
				sliding := []Hit{{Key: key, Algorithm: SlidingWindow, Limit: 5, Period: 5 * time.Second}}
				fixed := []Hit{{Key: key, Algorithm: FixedWindow, TTL: 5 * time.Second}}
				gcra := []Hit{{Key: key, Algorithm: GCRA, Limit: 5, Period: 5 * time.Second}}
				for i, h := range [][]Hit{sliding, fixed, sliding, gcra, sliding} {
					if err := storeHit(ctx, s, h, out); err != nil {
						t.Fatalf("step %d (%v): %v", i, h[0].Algorithm, err)
					}
					if h[0].Algorithm != FixedWindow && !out[0].Allowed {
						t.Fatalf("step %d (%v): refused a first hit: %+v", i, h[0].Algorithm, out[0])
					}
				}
			})
			t.Run("Relax", func(t *testing.T) {
				s, ks := mk(t)
				ctx := context.Background()
				if err := Relax(ctx, s, ks, "burst", 2.5, time.Minute); err != nil {
					t.Fatal(err)
				}
				got, err := ReadRelaxes(ctx, s, ks, []string{"burst", "api"})
				if err != nil {
					t.Fatal(err)
				}
				if got[0].Factor != 2.5 || got[0].TTL <= 0 || got[0].TTL > time.Minute {
					t.Fatalf("burst relax = %+v", got[0])
				}
				if got[1].Factor != 0 {
					t.Fatalf("api relax = %+v, want none", got[1])
				}
				if err := Relax(ctx, s, ks, "burst", 0.5, time.Minute); err != ErrBadRelax {
					t.Fatalf("factor 0.5: err = %v, want ErrBadRelax", err)
				}
			})
			t.Run("Ping", func(t *testing.T) {
				s, _ := mk(t)
				if err := s.Ping(context.Background()); err != nil {
					t.Fatal(err)
				}
			})
		})
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
				}).PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Second+time.Millisecond {
					t.Fatalf("key TTL %v, want in (0, 1s + the rounding slack's 1 ms]", ttl)
				}
			}
		})
	}
}

// TestStoreConformance_KeyWithoutTTLNeverLivesForever: the TTL is set in the same
// script as the first INCR (no window between INCR and EXPIRE to cut), a
// key left without a TTL by anything else gets one on its next hit, and
// every key the limiter writes has 0 < TTL ≤ window (aligned keys: window +
// 60s) — checked on the go-redis and REST stores.
func TestStoreConformance_KeyWithoutTTLNeverLivesForever(t *testing.T) {
	t.Parallel()
	for name, mk := range conformanceStores() {
		if name == "memory" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			store, ks := mk(t)
			rdb := newRedis(t, servicetest.RedisURL(t))
			if name == "go-redis-cluster" { // plant and inspect on the cluster the store uses
				rdb = testRedisCluster(t, ks.Prefix())
			}
			ctx := context.Background()
			stale := ks.RateLimit("burst", "203.0.113.9")
			// The one key a test writes without a TTL on purpose (the bug's
			// leftover); its sibling, a TTL longer than the window, needs none.
			if err := rdb.Set(ctx, stale, 7, 0).Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rdb.Del(ctx, stale) })
			long := ks.RateLimit("burst", "203.0.113.10")
			if err := rdb.Set(ctx, long, 7, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			opts := seedRules()
			opts.Timeout = 5 * time.Second // a loaded machine must not fail a decision open: every one writes its keys
			l, _ := newTestLimiter(t, opts, ks, store)
			for i := range 30 {
				for _, d := range l.Decide(ctx, Subject{Route: "portal", IP: "203.0.113." + strconv.Itoa(i%4+8), User: "u-" + strconv.Itoa(i%3), Escola: "e-1"}).Decisions {
					if d.Outcome == OutcomeError {
						t.Fatalf("decision %d of rule %s failed open: the keys counted below are not all written", i, d.Rule)
					}
				}
			}
			for _, k := range []string{stale, long} {
				if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > 5*time.Second {
					t.Fatalf("planted key %s PTTL = %v, want in (0, 5s]", k, ttl)
				}
			}
			// One key per subject and rule, counted without its window: a
			// run that crosses a minute writes an aligned rule's subject
			// in two windows (a loaded -parallel run saw 11 keys).
			subjects := map[string]bool{}
			for _, key := range scanKeys(t, rdb, ks.Prefix()+"rl:*") {
				subjects[withoutWindow(key)] = true
				limit := 5 * time.Second
				if !hasPrefix(key, ks.Prefix()+"rl:burst:") {
					limit = 2 * time.Minute
				}
				if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > limit {
					t.Errorf("key %s PTTL = %v, want in (0, %v]", key, ttl, limit)
				}
			}
			if n := len(subjects); n != 4+3+1 {
				t.Errorf("found rl keys of %d subjects, want 8: %v", n, subjects)
			}
		})
	}
}

// withoutWindow drops an aligned key's window suffix (":202612011020").
func withoutWindow(key string) string {
	i := strings.LastIndexByte(key, ':')
	if i < 0 || len(key)-i-1 != 12 {
		return key
	}
	for _, c := range key[i+1:] {
		if c < '0' || c > '9' {
			return key
		}
	}
	return key[:i]
}
