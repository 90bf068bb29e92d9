package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

func seedRules() Options {
	return rulesConfig(
		burstRule(50, 5*time.Second),
		Rule{Name: "api", Scope: ScopeUser, Limit: 600, Window: time.Minute, Routes: []string{"*"}},
		Rule{Name: "escola", Scope: ScopeEscola, Limit: 6000, Window: time.Minute, Routes: []string{"*"}},
	)
}

// TestDecide_ThreeRulesOneRedisCommand proves one round trip: ip, user and
// escola rules cost exactly one Redis command per request (a go-redis hook
// counts them), and the keys are those of docs/rate-limiting.md with their TTLs.
func TestDecide_ThreeRulesOneRedisCommand(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	counter := &commandCounter{}
	rdb.AddHook(counter)
	ks := keyspace.MustNew(prefix)
	// the store's clock pinned at 10:20:58: key names cannot race a
	// minute boundary (the test used to skip at second 59)
	store := NewRedisStore(rdb)
	now := time.Date(2026, 12, 1, 10, 20, 58, 0, time.UTC)
	pinStoreClock(store, now)
	reg := prometheus.NewRegistry()
	// The test counts commands, not latency: a deadline a loaded machine
	// cannot miss (the 30 ms default failed it at load 25 on two cores).
	opts := seedRules()
	opts.Timeout = 5 * time.Second
	l, err := New(withClock(opts, func() time.Time { return now }), ks, store, reg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s := Subject{Route: "portal", IP: "203.0.113.9", User: "u-42", Escola: "e-7"}
	ctx := context.Background()
	l.Decide(ctx, s) // loads the script on a server that has not cached it
	before := counter.n.Load()
	const n = 20
	for range n {
		if v := l.Decide(ctx, s); outcomes(v) != "burst=allow,api=allow,escola=allow" {
			t.Fatalf("outcomes = %s", outcomes(v))
		}
	}
	if got := counter.n.Load() - before; got != n {
		t.Fatalf("%d requests with three rules sent %d Redis commands, want %d", n, got, n)
	}
	if got := counterValue(t, reg, "borda_redis_commands_total", map[string]string{"purpose": "ratelimit"}); got != n+1 {
		t.Fatalf("borda_redis_commands_total{purpose=ratelimit} = %v, want %d", got, n+1)
	}
	minute := now.Truncate(time.Minute).Format("200601021504")
	for key, maxTTL := range map[string]time.Duration{
		prefix + "rl:burst:203.0.113.9":    5 * time.Second,
		prefix + "rl:api:u-42:" + minute:   2 * time.Minute,
		prefix + "rl:escola:e-7:" + minute: 2 * time.Minute,
	} {
		ttl := rdb.PTTL(ctx, key).Val()
		if ttl <= 0 || ttl > maxTTL {
			t.Errorf("key %s: PTTL %v, want in (0, %v]", key, ttl, maxTTL)
		}
		if got, _ := rdb.Get(ctx, key).Int64(); got != n+1 {
			t.Errorf("key %s = %d, want %d", key, got, n+1)
		}
	}
}

// TestDecide_NoRuleSendsNoRedisCommand: a route no rule covers costs zero
// round trips.
func TestDecide_NoRuleSendsNoRedisCommand(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	counter := &commandCounter{}
	rdb.AddHook(counter)
	cfg := rulesConfig(Rule{Name: "burst", Scope: ScopeIP, Limit: 5, Window: 5 * time.Second, Routes: []string{"api"}})
	l, _ := newTestLimiter(t, cfg, keyspace.MustNew(prefix), NewRedisStore(rdb))
	for range 10 {
		l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.9"})
	}
	if counter.n.Load() != 0 {
		t.Fatalf("uncovered route sent %d commands", counter.n.Load())
	}
}
