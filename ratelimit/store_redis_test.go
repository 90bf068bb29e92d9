package ratelimit

import (
	"context"
	"strconv"
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
	hits, nodes := hitsOnTwoMasters(t, cc, ks)
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

// The sync path (rate_limits.sync) pipelines its script the same way:
// with the script cached on one master only, each key is still merged
// once.
func TestRedisStore_ClusterNoScriptOnOneNodeDoesNotSyncTwice(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedisCluster(t, prefix)
	cc := rdb.(*redis.ClusterClient)
	ks := keyspace.MustNew(prefix)
	ctx := context.Background()
	hits, nodes := hitsOnTwoMasters(t, cc, ks)
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].ScriptLoad(ctx, syncScriptSource).Err(); err != nil {
		t.Fatal(err)
	}
	ops := []SyncOp{{Hit: hits[0], Local: KeyState{N: 1, TTL: 5 * time.Second}}, {Hit: hits[1], Local: KeyState{N: 1, TTL: 5 * time.Second}}}
	out := make([]KeyState, 2)
	if _, err := NewRedisStore(rdb).Sync(ctx, ops, out); err != nil {
		t.Fatal(err)
	}
	if out[0].N != 1 || out[1].N != 1 {
		t.Fatalf("counts after one sync of one hit each = %d, %d; want 1, 1", out[0].N, out[1].N)
	}
}

// hitsOnTwoMasters returns fixed-window hits on two keys that live on two
// different masters of cc, and those masters.
func hitsOnTwoMasters(t *testing.T, cc *redis.ClusterClient, ks keyspace.Keyspace) ([]Hit, []*redis.Client) {
	t.Helper()
	var hits []Hit
	var nodes []*redis.Client
	seen := map[string]bool{}
	for i := 0; len(hits) < 2 && i < 64; i++ {
		k := ks.RateLimit("burst", "198.51.100."+strconv.Itoa(i))
		node, err := cc.MasterForKey(context.Background(), k)
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
	return hits, nodes
}
