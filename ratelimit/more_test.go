package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// TestRedisStore_ClusterPathPerKeyPipeline runs the Redis Cluster code path
// (one EVALSHA per key in one pipeline, EVAL on NOSCRIPT) against a fresh
// private redis-server, whose script cache is empty.
func TestRedisStore_ClusterPathPerKeyPipeline(t *testing.T) {
	t.Parallel()
	addr, _ := privateRedis(t)
	rdb := newRedis(t, "redis://"+addr+"/0")
	s := NewRedisStore(rdb)
	s.cluster = true
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	now := time.Now()
	hits := []Hit{
		{Key: ks.RateLimit("burst", "192.0.2.1"), Algorithm: FixedWindow, TTL: 5 * time.Second},
		{Key: ks.RateLimit("g", "u-1"), Algorithm: GCRA, Limit: 2, Period: time.Second},
	}
	out := make([]Count, 2)
	for i := 1; i <= 3; i++ {
		if err := hitAt(context.Background(), s, now, hits, out); err != nil {
			t.Fatalf("hit %d: %v", i, err)
		}
		if out[0].N != int64(i) {
			t.Fatalf("hit %d: N = %d", i, out[0].N)
		}
	}
	if out[1].Allowed {
		t.Fatal("3rd GCRA hit at the same instant allowed with limit 2")
	}
	vals, err := s.ReadRelax(context.Background(), []string{ks.Relax("a"), ks.Relax("b")})
	if err != nil || len(vals) != 2 {
		t.Fatalf("ReadRelax = %v, %v", vals, err)
	}
}

func TestMemoryStore_MemoryIsBounded(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(64)
	out := make([]Count, 1)
	for i := range 10_000 {
		_ = storeHit(context.Background(), s, []Hit{{Key: "k" + strconv.Itoa(i), Algorithm: FixedWindow, TTL: time.Hour}}, out)
	}
	if n := s.Len(); n > 64 {
		t.Fatalf("store holds %d keys, bound 64", n)
	}
}

func TestReload_ConcurrentWithDecide(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(t, rulesConfig(burstRule(1000, 5*time.Second)), testKS, NewMemoryStore(0))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				l.Decide(context.Background(), Subject{Route: "portal", IP: "192.0.2." + strconv.Itoa(g), User: strconv.Itoa(i)})
			}
		})
	}
	for i := range 50 {
		cfg := rulesConfig(burstRule(int64(1000+i), 5*time.Second),
			Rule{Name: "api", Scope: ScopeUser, Limit: 10, Window: time.Minute, Routes: []string{"*"}})
		if err := l.Reload(cfg.Rules); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestBreakerOpen_OnStoreErrorLocalStillLimitsIPs(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(burstRule(3, 5*time.Second))
	cfg.OnStoreError = LocalIP
	cfg.BreakerFailures, cfg.BreakerOpenFor = 1, time.Minute
	store := &countingStore{Store: NewMemoryStore(0)}
	store.fail.Store(true)
	l, _ := newTestLimiter(t, cfg, testKS, store)
	l.Start(context.Background())
	defer l.Stop(context.Background())
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	var v Verdict
	for range 4 {
		v = l.Decide(context.Background(), s)
	}
	if !v.Blocked() || store.hits.Load() != 1 {
		t.Fatalf("breaker open, local: %s after %d store calls", outcomes(v), store.hits.Load())
	}
}

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

// On a real three-master Redis Cluster one request's rule keys live on
// different nodes (the contract's key names carry no hash tag); one Hit
// still decides them all, each key on its own node.
func TestRedisStore_ClusterKeysOnDifferentNodes(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedisCluster(t, prefix)
	cc := rdb.(*redis.ClusterClient)
	ks := keyspace.MustNew(prefix)
	ctx := context.Background()
	var hits []Hit
	nodes := map[string]bool{}
	for i := 0; len(nodes) < 2 && i < 64; i++ {
		k := ks.RateLimit("burst", "192.0.2."+strconv.Itoa(i))
		node, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		nodes[node.Options().Addr] = true
		hits = append(hits, Hit{Key: k, Algorithm: FixedWindow, TTL: 5 * time.Second})
	}
	if len(nodes) < 2 {
		t.Fatalf("64 keys all on one node of a three-master cluster")
	}
	hits = append(hits, Hit{Key: ks.RateLimit("g", "u-1"), Algorithm: GCRA, Limit: 10, Period: time.Second})
	s := NewRedisStore(rdb)
	out := make([]Count, len(hits))
	for want := int64(1); want <= 2; want++ {
		if err := storeHit(ctx, s, hits, out); err != nil {
			t.Fatal(err)
		}
		for i, c := range out[:len(out)-1] {
			if c.N != want || c.TTL <= 0 || c.TTL > 5*time.Second {
				t.Fatalf("hit %d, key %d: %+v", want, i, c)
			}
		}
		if !out[len(out)-1].Allowed {
			t.Fatalf("hit %d: GCRA refused under its limit", want)
		}
	}
}

// Cluster nodes cache scripts each on their own. A pipeline that met
// NOSCRIPT on one node was sent again whole, as EVAL, so the keys on the
// nodes that had the script were counted twice (a burst limit of 5 then
// refused the 3rd request). Only the NOSCRIPT keys are sent again now.
func TestRedisStore_ClusterNoScriptOnOneNodeDoesNotCountTwice(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedisCluster(t, prefix)
	cc := rdb.(*redis.ClusterClient)
	ks := keyspace.MustNew(prefix)
	ctx := context.Background()
	// Two keys on two different masters.
	var hits []Hit
	var nodes []*redis.Client
	seen := map[string]bool{}
	for i := 0; len(hits) < 2 && i < 64; i++ {
		k := ks.RateLimit("burst", "198.51.100."+strconv.Itoa(i))
		node, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if addr := node.Options().Addr; !seen[addr] {
			seen[addr] = true
			nodes = append(nodes, node)
			hits = append(hits, Hit{Key: k, Algorithm: FixedWindow, TTL: 5 * time.Second})
		}
	}
	if len(hits) < 2 {
		t.Fatal("64 keys all on one node of a three-master cluster")
	}
	// The script cached on the first key's node only.
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].ScriptLoad(ctx, hitScriptSource).Err(); err != nil {
		t.Fatal(err)
	}
	out := make([]Count, 2)
	if err := storeHit(ctx, NewRedisStore(rdb), hits, out); err != nil {
		t.Fatal(err)
	}
	if out[0].N != 1 || out[1].N != 1 {
		t.Fatalf("counts after one hit = %d, %d; want 1, 1", out[0].N, out[1].N)
	}
}
