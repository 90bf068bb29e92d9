package ratelimit

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// TestEdgeCase15_KeyWithoutTTLNeverLivesForever: the TTL is set in the same
// script as the first INCR (no window between INCR and EXPIRE to cut), a
// key left without a TTL by anything else gets one on its next hit, and
// every key the limiter writes has 0 < TTL ≤ window (aligned keys: window +
// 60s) — checked on the go-redis and REST stores.
func TestEdgeCase15_KeyWithoutTTLNeverLivesForever(t *testing.T) {
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
			if err := rdb.Set(ctx, stale, 7, 0).Err(); err != nil { // the bug's leftover: no TTL
				t.Fatal(err)
			}
			t.Cleanup(func() { rdb.Del(ctx, stale) })
			l, _ := newTestLimiter(t, seedRules(), ks, store)
			for i := range 30 {
				l.Decide(ctx, Subject{Route: "portal", IP: "203.0.113." + strconv.Itoa(i%4+8), User: "u-" + strconv.Itoa(i%3), Escola: "e-1"})
			}
			if ttl := rdb.PTTL(ctx, stale).Val(); ttl <= 0 || ttl > 5*time.Second {
				t.Fatalf("stale key PTTL = %v, want in (0, 5s]", ttl)
			}
			n := 0
			for _, key := range scanKeys(t, rdb, ks.Prefix()+"rl:*") {
				n++
				limit := 5 * time.Second
				if !hasPrefix(key, ks.Prefix()+"rl:burst:") {
					limit = 2 * time.Minute
				}
				if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > limit {
					t.Errorf("key %s PTTL = %v, want in (0, %v]", key, ttl, limit)
				}
			}
			if n != 4+3+1 {
				t.Errorf("found %d rl keys, want 8", n)
			}
		})
	}
}

// TestEdgeCase16_RetryAfterWholeSecondsOnlyOn429: limit 5/min; the 6th
// request's Retry-After is whole seconds in [1, 60] (never milliseconds,
// never negative), and an allowed response carries none.
func TestEdgeCase16_RetryAfterWholeSecondsOnlyOn429(t *testing.T) {
	t.Parallel()
	for _, algo := range []Algorithm{FixedWindow, GCRA} {
		t.Run(algo.String(), func(t *testing.T) {
			t.Parallel()
			r := Rule{Name: "api", Scope: ScopeUser, Algorithm: algo, Limit: 5, Window: time.Minute, Routes: []string{"*"}}
			l, _ := newTestLimiter(t, rulesConfig(r), keyspace.MustNew("olp-dev:edge16:"), NewMemoryStore(0))
			s := Subject{Route: "portal", IP: "192.0.2.1", User: "u-16"}
			for i := 1; i <= 5; i++ {
				v := l.Decide(context.Background(), s)
				rec := httptest.NewRecorder()
				WriteHeaders(rec.Header(), v)
				if v.Blocked() || rec.Header().Get("Retry-After") != "" {
					t.Fatalf("allowed request %d: blocked=%v Retry-After=%q", i, v.Blocked(), rec.Header().Get("Retry-After"))
				}
			}
			v := l.Decide(context.Background(), s)
			rec := httptest.NewRecorder()
			WriteTooManyRequests(rec, v)
			ra, err := strconv.Atoi(rec.Header().Get("Retry-After"))
			if err != nil || ra < 1 || ra > 60 {
				t.Fatalf("Retry-After = %q, want whole seconds in [1, 60]", rec.Header().Get("Retry-After"))
			}
			reset, err := strconv.Atoi(rec.Header().Get("X-RateLimit-Reset"))
			if err != nil || reset < 1 || reset > 60 {
				t.Fatalf("X-RateLimit-Reset = %q, want delta seconds in [1, 60]", rec.Header().Get("X-RateLimit-Reset"))
			}
		})
	}
}
