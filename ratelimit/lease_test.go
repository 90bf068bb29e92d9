package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// floodReplicas sends one client's requests round-robin over ls, one
// every gap, for d, and returns the passed requests per window of the
// rule (windows numbered from the first request) and the requests sent.
func floodReplicas(t *testing.T, ls []*Limiter, window, gap, d time.Duration) ([]int, int) {
	t.Helper()
	ctx := context.Background()
	s := Subject{Route: "portal", IP: "203.0.113.91"}
	// Start on a window edge of the clock: sliding windows are aligned to
	// it (the store's clock is this machine's), fixed ones start at the
	// first hit, so the windows counted here are the rule's own.
	start := time.Now().Truncate(window).Add(window)
	time.Sleep(time.Until(start))
	per := make([]int, int(d/window)+1)
	sent := 0
	for next := start; time.Since(start) < d; next = next.Add(gap) {
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
		at := time.Since(start)
		// A request sent late (a loaded machine) past the last window
		// is not counted in any.
		if !ls[sent%len(ls)].Decide(ctx, s).Blocked() && int(at/window) < len(per) {
			per[int(at/window)]++
		}
		sent++
	}
	return per[:int(d/window)], sent
}

func startedReplicas(t *testing.T, n int, rule Rule, ks keyspace.Keyspace, store func() Store) []*Limiter {
	t.Helper()
	opts := rulesConfig(rule)
	opts.Sync = 50 * time.Millisecond
	opts.Timeout = time.Second // a loaded machine must not fail a round or fail a decision open
	ls := make([]*Limiter, n)
	for i := range ls {
		ls[i], _ = newTestLimiterWith(t, opts, ks, store())
		if err := ls[i].Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ls[i].Stop(context.Background()) })
	}
	// Every replica learns the others (registration is in each round).
	for deadline := time.Now().Add(10 * time.Second); ; {
		ok := true
		for _, l := range ls {
			ok = ok && l.sync.replicas.Load() == int64(n)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas did not see each other")
		}
		for _, l := range ls {
			l.syncRound(context.Background())
		}
	}
	return ls
}

// Three synchronizing replicas on one Redis, one client round-robin over
// them at up to 1 000 requests/s for 4 windows of 50 per second: every
// algorithm passes at most 1.1 × what one replica (exact: it decides as
// the round trip does) passes on the same schedule; a fixed or sliding
// window ≤ limit + 5 in every window, the first included (their leases
// are reserved in the store). GCRA is held to the ratio only: a bucket
// refills while the machine stalls the flood, so a GCRA window after a
// stall passes more than the limit with one replica too (a loaded run
// counted 56 in one window, and 100 for one replica's first); its
// per-window bound is TestSync_ThreeReplicasHoldEveryWindowOnADrivenClock's,
// on a driven clock. Real time: the rounds' phases are the machine's. Before quota leasing each replica
// started every window from zero (about 1.7 × the limit per window with
// three replicas; GCRA about 2 ×).
func TestSync_ThreeReplicasHoldEveryWindowToTheirShare(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: a 33 s flood in real time (scripts/mutation.sh runs -short; docs/testing.md)")
	}
	const (
		replicas = 3
		limit    = 50
		window   = time.Second
		windows  = 4
		slack    = 5
	)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
		t.Run(fmt.Sprint(alg), func(t *testing.T) {
			run := func(n int) ([]int, int) {
				prefix := servicetest.KeyPrefix(t)
				rdb := testRedis(t, prefix)
				ks := keyspace.MustNew(prefix)
				rule := burstRule(limit, window)
				rule.Algorithm = alg
				ls := startedReplicas(t, n, rule, ks, func() Store { return NewRedisStore(rdb) })
				return floodReplicas(t, ls, window, time.Millisecond, windows*window+window/2)
			}
			one, sentOne := run(1)
			per, sent := run(replicas)
			t.Logf("%v: 1 replica %d requests, passed per window %v; %d replicas %d requests, passed per window %v", alg, sentOne, one, replicas, sent, per)
			if sent < 3*limit*windows || sentOne < 3*limit*windows {
				t.Skipf("machine too loaded: %d/%d requests sent, a meaningful run needs %d (3 × the limit per window)", sentOne, sent, 3*limit*windows)
			}
			// Every fixed window, its first included: the replicas adopt
			// the store's window (KeyState.End) and their leases are
			// reserved in its count (before: the windows drifted apart by
			// up to a sync interval, 50-65 per window).
			bound, ratio := limit+slack, 1.1
			total, totalOne := 0, 0
			for i, n := range per {
				total, totalOne = total+n, totalOne+one[i]
				if alg != GCRA && n > bound {
					t.Errorf("window %d passed %d, want ≤ %d", i, n, bound)
				}
			}
			if float64(total) > ratio*float64(totalOne) {
				t.Errorf("%d replicas passed %d in %d windows, one replica %d: want ≤ %.2f ×", replicas, total, windows, totalOne, ratio)
			}
		})
	}
}

// Registration rides on the sync call on every store that registers: two
// replicas (go-redis and Upstash REST) each see 2, the registry has a TTL
// (no key without one), and a replica not seen within the lifetime drops
// out of the count.
func TestSyncRegister_CountsReplicasWithATTLOnEveryStore(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	ks := keyspace.MustNew(prefix)
	rest := restStoreOn(t, rdb)
	ctx := context.Background()
	hit := Hit{Key: ks.RateLimit("burst", "203.0.113.5"), Algorithm: FixedWindow, TTL: time.Minute, Limit: 10}
	ops := []SyncOp{{Hit: hit, Local: KeyState{N: 1, TTL: time.Minute}}}
	// A lifetime no loaded machine outlasts between the two calls (300 ms
	// did: r0 expired before r1 registered); the expiry is checked below
	// with a short one, which only makes the loop wait less.
	life := 30 * time.Second
	stores := []RegisteringSyncer{NewRedisStore(rdb), rest}
	var seen []int64
	for i, s := range stores {
		_, n, err := s.SyncRegister(ctx, ops, make([]KeyState, 1), Registration{ID: fmt.Sprint("r", i), Key: ks.RateLimitReplicas(), TTL: life})
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, n)
	}
	if seen[0] != 1 || seen[1] != 2 {
		t.Fatalf("replicas seen %v, want [1 2]", seen)
	}
	if ttl := rdb.PTTL(ctx, ks.RateLimitReplicas()).Val(); ttl <= 0 || ttl > life {
		t.Fatalf("registry TTL %v, want in (0, %v]", ttl, life)
	}
	// r0 is not seen again: once it is older than the lifetime r1 gives,
	// only r1 counts.
	short := 300 * time.Millisecond
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, n, err := rest.SyncRegister(ctx, nil, nil, Registration{ID: "r1", Key: ks.RateLimitReplicas(), TTL: short})
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a replica not seen for %v still counted (%d)", short, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A key that does not flood never asks the store: its lease, reserved in
// a fixed window by the replica's rounds, is not spent by the window's
// end, and in the next window the key starts afresh (a share of the
// limit, reserved by the next round) instead of asking at its first
// request of every window. Three replicas, a fixed window of 1 s, six
// requests per window round-robin (two per replica) for four windows.
func TestSync_AKeyNotFloodingAsksNothingFromWindowToWindow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: four windows of 1 s in real time")
	}
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	ks := keyspace.MustNew(prefix)
	const window = time.Second
	ls := startedReplicas(t, 3, burstRule(50, window), ks, func() Store { return NewRedisStore(rdb) })
	ctx := context.Background()
	s := Subject{Route: "portal", IP: "203.0.113.92"}
	for w := range 4 {
		for i := range 6 {
			if ls[i%3].Decide(ctx, s).Blocked() {
				t.Fatalf("window %d request %d refused, far below the limit", w, i)
			}
		}
		// Each replica's rounds carry its count and reserve its share
		// before the window ends.
		for _, l := range ls {
			l.syncRound(ctx)
		}
		end := time.Now().Add(time.Duration(rdb.PTTL(ctx, ks.RateLimit("burst", s.IP)).Val()))
		time.Sleep(time.Until(end) + 5*time.Millisecond) // the next window: past the store's key
	}
	for i, l := range ls {
		var m dto.Metric
		if err := l.sync.asks.Write(&m); err != nil {
			t.Fatal(err)
		}
		if n := m.GetCounter().GetValue(); n != 0 {
			t.Errorf("replica %d asked the store %v times for a key far below its limit", i, n)
		}
	}
}

// Fresh attack pass 18 R11: members written into the replica registry
// with a score an hour ahead (by hand, with write access to Redis) never
// aged out, the registry counted 63 replicas for good, and every rule
// whose limit is below that was decided by the store per request. A
// registration removes the members dated more than a lifetime ahead, on
// go-redis and on the REST store, and keeps its own.
func TestSyncRegister_ForgetsMembersDatedAhead(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	ks := keyspace.MustNew(prefix)
	ctx := context.Background()
	life := time.Minute
	for name, s := range map[string]RegisteringSyncer{"go-redis": NewRedisStore(rdb), "rest": restStoreOn(t, rdb)} {
		key := ks.RateLimitReplicas() + ":" + name
		now := time.Now()
		// Forged with a TTL in the same transaction: a run killed before
		// the registration below must not leave a key that never expires.
		if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for i, ahead := range []time.Duration{time.Hour, 2 * life, life / 2} {
				p.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(ahead).UnixMilli()), Member: fmt.Sprint("forged", i)})
			}
			p.PExpire(ctx, key, 2*time.Hour)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		_, n, err := s.SyncRegister(ctx, nil, nil, Registration{ID: "real", Key: key, TTL: life})
		if err != nil {
			t.Fatal(err)
		}
		members := rdb.ZRange(ctx, key, 0, -1).Val()
		// The one dated half a lifetime ahead stays (a store clock
		// stepped back); an hour and two lifetimes ahead go.
		if n != 2 || len(members) != 2 {
			t.Errorf("%s: %d replicas counted, members %v; want 2 (real and forged2)", name, n, members)
		}
	}
}
