package ratelimit

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/keyspace"
)

// skewedLimiter is a Limiter whose clock is off by skew, on its own
// registry, as one replica of a fleet whose NTP broke.
func skewedLimiter(t *testing.T, cfg Options, ks keyspace.Keyspace, store Store, skew time.Duration) *Limiter {
	t.Helper()
	cfg.Timeout = time.Second // a loaded machine must not fail open here
	l, err := New(withClock(cfg, func() time.Time { return time.Now().Add(skew) }), ks, store, prometheus.NewRegistry(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var skewRules = map[string]Rule{
	"gcra":           {Name: "g", Scope: ScopeIP, Algorithm: GCRA, Limit: 50, Window: 5 * time.Second, Routes: []string{"*"}},
	"sliding_window": {Name: "s", Scope: ScopeIP, Algorithm: SlidingWindow, Limit: 50, Window: 5 * time.Second, Routes: []string{"*"}},
	"fixed_window":   {Name: "f", Scope: ScopeIP, Limit: 50, Window: 5 * time.Second, Routes: []string{"*"}},
	// clock-aligned minute keys: the key name needs a time on the
	// replica's side, taken from the store's clock
	"fixed_window_aligned": {Name: "a", Scope: ScopeUser, Limit: 50, Window: time.Minute, Routes: []string{"*"}},
}

// skewAllowed is the most a fleet may pass against rule (50 per window)
// in elapsed: a refilling algorithm refills at limit per window, a fixed
// window rolls; a clock-aligned rule may count one request per replica
// under its own clock's minute before the first reply shows the skew.
func skewAllowed(alg string, elapsed time.Duration, minutes int) int {
	const limit = 50
	switch alg {
	case "gcra", "sliding_window":
		return limit + int(math.Ceil(limit*elapsed.Seconds()/5)) + 1
	case "fixed_window":
		return limit * (1 + int(elapsed/(5*time.Second)))
	default:
		return limit*minutes + 2
	}
}

// Two replicas on one Redis, one of them behind by 2 s or 30 s (or ahead):
// GCRA took now from each replica, so each time the lagging one's deny
// cache expired it cut the arrival time back to its own now + period and
// the other found a full bucket again (510 passed in 5 s against 50 per
// 5 s; the old code passes about 315 here in 1.5 s). Every algorithm now
// decides on Redis's TIME, so the fleet stays within the limit whatever
// the replicas' clocks say, on go-redis and on Upstash REST. This runs in
// real time (Redis's clock cannot be driven), paced and bounded at 1.5 s
// (and at least 100 requests);
// TestSkewedReplicas_StayWithinTheLimitOverManyWindows drives the store's
// clock over many windows.
func TestSkewedReplicas_StayWithinTheLimit(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T, prefix string) Store{
		"go-redis": func(t *testing.T, prefix string) Store { return NewRedisStore(testRedis(t, prefix)) },
		"upstash-rest": func(t *testing.T, prefix string) Store {
			srv := upstashtest.Start(testRedis(t, prefix), "test-token")
			t.Cleanup(srv.Close)
			s, err := NewRESTStore(srv.URL, "test-token", nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for storeName, mk := range stores {
		for _, alg := range []string{"gcra", "sliding_window", "fixed_window_aligned"} {
			for _, skew := range []time.Duration{-2 * time.Second, 30 * time.Second} {
				t.Run(fmt.Sprintf("%s/%s/skew%v", storeName, alg, skew), func(t *testing.T) {
					t.Parallel()
					prefix := servicetest.KeyPrefix(t)
					store := mk(t, prefix)
					ks := keyspace.MustNew(prefix)
					cfg := rulesConfig(skewRules[alg])
					fleet := []*Limiter{
						skewedLimiter(t, cfg, ks, store, 0),
						skewedLimiter(t, cfg, ks, store, skew),
					}
					s := Subject{Route: "portal", IP: "203.0.113.77", User: "u-77"}
					ctx := context.Background()
					startMinute := time.Now().Truncate(time.Minute)
					start := time.Now()
					passed, requests, failedOpen := 0, 0, 0
					// At least 100 requests, however long a loaded machine
					// takes for them (the bound below follows the elapsed
					// time): fewer could not show the limit's 50 passing.
					for ; requests < 2000 && (time.Since(start) < 1500*time.Millisecond || requests < 100); requests++ {
						v := fleet[requests%2].Decide(ctx, s)
						if d := v.Decisions[0]; d.Outcome == OutcomeError {
							// A store call a loaded machine stalled past the
							// 1 s timeout fails open: it still counts as passed
							// below (the bound only gets stricter), but most
							// decisions must have come from the store.
							failedOpen++
						}
						if !v.Blocked() {
							passed++
						}
						time.Sleep(2 * time.Millisecond)
					}
					elapsed := time.Since(start)
					if failedOpen*20 > requests {
						t.Fatalf("%d of %d decisions failed open: the store did not answer", failedOpen, requests)
					}
					minutes := 1
					if !time.Now().Truncate(time.Minute).Equal(startMinute) {
						minutes = 2
					}
					if allowed := skewAllowed(alg, elapsed, minutes); passed > allowed {
						t.Fatalf("%d of %d requests passed in %v from two replicas %v apart, limit 50 per %v (at most %d may pass)",
							passed, requests, elapsed, skew, skewRules[alg].Window, allowed)
					}
					if passed < 50 {
						t.Fatalf("only %d requests passed, want at least the limit 50", passed)
					}
				})
			}
		}
	}
}

// The same fleet over 12 s of the store's time, stepped by 10 ms: the
// store's clock is pinned per step (it plays Redis's TIME; the embedded
// store's clock is set), the replicas' clocks are that plus their skew.
// Deterministic, and it crosses several windows of every algorithm.
func TestSkewedReplicas_StayWithinTheLimitOverManyWindows(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T, prefix string) Store{
		"memory":   func(*testing.T, string) Store { return NewMemoryStore(0) },
		"go-redis": func(t *testing.T, prefix string) Store { return NewRedisStore(testRedis(t, prefix)) },
	}
	for storeName, mk := range stores {
		for alg, rule := range skewRules {
			for _, skew := range []time.Duration{-2 * time.Second, -30 * time.Second, 30 * time.Second} {
				t.Run(fmt.Sprintf("%s/%s/skew%v", storeName, alg, skew), func(t *testing.T) {
					prefix := servicetest.KeyPrefix(t)
					store := mk(t, prefix)
					ks := keyspace.MustNew(prefix)
					cfg := rulesConfig(rule)
					cfg.Timeout = time.Second
					virt := time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)
					var fleet []*Limiter
					for _, sk := range []time.Duration{0, skew} {
						l, err := New(withClock(cfg, func() time.Time { return virt.Add(sk) }), ks, store, prometheus.NewRegistry(), testLogger(t))
						if err != nil {
							t.Fatal(err)
						}
						fleet = append(fleet, l)
					}
					s := Subject{Route: "portal", IP: "203.0.113.78", User: "u-78"}
					const span = 12 * time.Second
					start, passed := virt, 0
					for i := 0; virt.Sub(start) < span; i++ {
						pinStoreClock(store, virt)
						if v := fleet[i%2].Decide(context.Background(), s); !v.Blocked() {
							passed++
						}
						virt = virt.Add(10 * time.Millisecond)
					}
					if allowed := skewAllowed(alg, span, 1); passed > allowed {
						t.Fatalf("%d requests passed in %v of store time from two replicas %v apart (at most %d may pass)", passed, span, skew, allowed)
					}
				})
			}
		}
	}
}

// The limiter's clock times only what is local (deny cache, relax expiry):
// the key a clock-aligned rule counts in is named after the store's
// minute, as the last reply showed it, so a replica 30 s ahead counts in
// the same key as the others from its second request on.
func TestSkewedReplica_AlignedKeyNamedAfterTheStoresMinute(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	store := NewRedisStore(rdb)
	storeNow := time.Date(2026, 12, 1, 10, 20, 10, 0, time.UTC)
	pinStoreClock(store, storeNow)
	ks := keyspace.MustNew(prefix)
	cfg := rulesConfig(Rule{Name: "api", Scope: ScopeUser, Limit: 600, Window: time.Minute, Routes: []string{"*"}})
	// A loaded machine must not fail a decision open: each one is counted
	// below (-parallel 16 saw 3 of 5 with the 30 ms default).
	cfg.Timeout = 5 * time.Second
	replica := time.Date(2026, 12, 1, 10, 21, 5, 0, time.UTC) // 55 s ahead, in the next minute
	l, err := New(withClock(cfg, func() time.Time { return replica }), ks, store, prometheus.NewRegistry(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := Subject{Route: "portal", IP: "203.0.113.9", User: "u-42"}
	// The first decision counts in the replica's own minute (1021, no
	// estimate yet); its reset is corrected by what the store said: that
	// minute ends 110 s after the store's 10:20:10, not 55 s after the
	// replica's 10:21:05.
	if first := l.Decide(ctx, s).Decisions[0]; first.ResetAfter != 110*time.Second {
		t.Errorf("the first decision's ResetAfter = %v, want 110s (its key's end on the store's clock)", first.ResetAfter)
	}
	const n = 5
	var last Decision
	for range n {
		last = l.Decide(ctx, s).Decisions[0]
	}
	want := prefix + "rl:api:u-42:202612011020"
	if got, _ := rdb.Get(ctx, want).Int64(); got != n {
		t.Fatalf("key %s = %d, want %d (the replica's own minute would be 1021)", want, got, n)
	}
	if last.ResetAfter != 50*time.Second {
		t.Fatalf("ResetAfter = %v, want 50s (to the store's next minute)", last.ResetAfter)
	}
}

// zeroTimeStore answers without saying its time, as a Store written
// before Hit returned one might.
type zeroTimeStore struct{ Store }

func (s zeroTimeStore) Hit(ctx context.Context, hits []Hit, out []Count) (time.Time, error) {
	_, err := s.Store.Hit(ctx, hits, out)
	return time.Time{}, err
}

// A store that returns the zero Time must not turn the skew estimate into
// "now minus 2026 years" (clock-aligned keys named for year 1).
func TestDecide_StoreWithoutATimeKeepsTheClockEstimate(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(Rule{Name: "api", Scope: ScopeUser, Limit: 600, Window: time.Minute, Routes: []string{"*"}})
	l, _ := newTestLimiter(t, cfg, testKS, zeroTimeStore{NewMemoryStore(0)})
	s := Subject{Route: "portal", User: "u-1"}
	for range 2 {
		d := l.Decide(context.Background(), s).Decisions[0]
		if d.Outcome != OutcomeAllow || d.ResetAfter <= 0 || d.ResetAfter > time.Minute {
			t.Fatalf("%+v", d)
		}
	}
	if skew := time.Duration(l.skew.Load()); skew != 0 {
		t.Fatalf("skew = %v after replies without a time", skew)
	}
}
