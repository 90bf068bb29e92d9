package ratelimit

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// keySpaceIP is the i-th of many distinct client addresses.
func keySpaceIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }

// rememberAtMost makes l's syncer remember at most n keys (SyncKeys in
// production), before any hit.
func rememberAtMost(l *Limiter, n int) {
	clock := l.sync.view.now
	l.sync.view = newMemoryStoreEvicting(n, l.sync.forget)
	l.sync.view.SetClock(clockFunc(clock))
}

// Issue 27 item 5: with 100 000 client IPs only 65 536 keys reached the
// store (the key map stopped taking keys at a fixed bound, and past it
// their counts were never sent). Now every key hit reaches the store by
// the next round, past the keys the replica remembers (10 000 keys, 4 096
// remembered, a round every 1 000 hits), none is dropped, and each holds
// exactly its count.
func TestSync_KeysPastTheOldBoundsAllReachTheStore(t *testing.T) {
	t.Parallel()
	const keys, remembered, perRound = 10_000, 4096, 1000
	store := NewMemoryStore(2 * keys)
	opts := rulesConfig(burstRule(1000, time.Hour))
	opts.Sync = time.Hour // rounds by hand below
	reg := prometheus.NewRegistry()
	l, err := New(opts, testKS, store, reg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	rememberAtMost(l, remembered)
	ctx := context.Background()
	for i := range keys {
		l.Decide(ctx, Subject{Route: "portal", IP: keySpaceIP(i)})
		if i%perRound == perRound-1 {
			l.syncRound(ctx)
		}
	}
	l.syncRound(ctx)
	if n := store.Len(); n != keys {
		t.Fatalf("the store holds %d keys after %d distinct keys were hit", n, keys)
	}
	if v := counterValue(t, reg, "borda_ratelimit_sync_dropped_total", nil); v != 0 {
		t.Fatalf("%v counts dropped", v)
	}
	// The first keys were forgotten by the replica (it remembers 4 096);
	// hit again, each is counted into the store's count, not
	// over it.
	for i := range 3 {
		l.Decide(ctx, Subject{Route: "portal", IP: keySpaceIP(i)})
	}
	l.syncRound(ctx)
	hits := make([]Hit, 4)
	for i := range hits {
		hits[i] = Hit{Key: testKS.RateLimit("burst", keySpaceIP(i)), Algorithm: FixedWindow, TTL: time.Hour}
	}
	got := make([]KeyState, len(hits))
	store.snapshot(hits, got)
	for i, want := range []int64{2, 2, 2, 1} { // key 3 was hit once
		if got[i].N != want {
			t.Errorf("key %d: stored %d, want %d", i, got[i].N, want)
		}
	}
	if n := l.sync.view.Len(); n > remembered {
		t.Errorf("the view holds %d keys, over the %d it may remember", n, remembered)
	}
	l.sync.mu.Lock()
	tracked := l.sync.keys.len()
	l.sync.mu.Unlock()
	if tracked > remembered {
		t.Errorf("the syncer tracks %d keys, over the %d remembered", tracked, remembered)
	}
}

// slowSyncStore takes perKey of store time for each key of a Sync call,
// as Redis does running the sync script, and records the calls' sizes.
type slowSyncStore struct {
	*MemoryStore
	perKey time.Duration
	mu     sync.Mutex
	sizes  []int
}

func (s *slowSyncStore) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(ops))
	s.mu.Unlock()
	select {
	case <-time.After(time.Duration(len(ops)) * s.perKey):
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
	return s.MemoryStore.Sync(ctx, ops, out)
}

// A round of many keys was one call under one deadline: past the sync
// timeout it failed whole, every round after it too (its keys stayed
// dirty, the next round larger). Now a round streams chunks of syncChunk
// keys, each under its own deadline: 20 000 keys at 20 µs each (0.4 s of
// store time against a 50 ms timeout) all reach the store in one round.
func TestSync_ARoundOfManyKeysIsNotOneCallUnderOneDeadline(t *testing.T) {
	t.Parallel()
	const keys = 20_000
	store := &slowSyncStore{MemoryStore: NewMemoryStore(2 * keys), perKey: 20 * time.Microsecond}
	opts := rulesConfig(burstRule(1000, time.Hour))
	opts.Sync = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	l, err := New(opts, testKS, store, reg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range keys {
		l.Decide(ctx, Subject{Route: "portal", IP: keySpaceIP(i)})
	}
	if _, _, err := l.sync.round(ctx); err != nil {
		t.Fatalf("round of %d keys: %v", keys, err)
	}
	if n := store.Len(); n != keys {
		t.Fatalf("the store holds %d of %d keys after one round", n, keys)
	}
	for _, n := range store.sizes {
		if n > syncChunk {
			t.Fatalf("a call carried %d keys, over the chunk of %d", n, syncChunk)
		}
	}
	if got := counterValue(t, reg, "borda_ratelimit_sync_rounds_total", map[string]string{"result": "ok"}); got != 1 {
		t.Fatalf("rounds ok = %v, want 1", got)
	}
}

// A round sends only the keys counted since the last one: a key seen once
// is not sent again while it is not hit.
func TestSync_ARoundSendsOnlyTheKeysCountedSinceTheLast(t *testing.T) {
	t.Parallel()
	store := &slowSyncStore{MemoryStore: NewMemoryStore(0)}
	opts := rulesConfig(burstRule(1000, time.Hour))
	opts.Sync = time.Hour
	l, _ := newTestLimiterWith(t, opts, testKS, store)
	ctx := context.Background()
	for i := range 1000 {
		l.Decide(ctx, Subject{Route: "portal", IP: keySpaceIP(i)})
	}
	l.syncRound(ctx)
	l.Decide(ctx, Subject{Route: "portal", IP: keySpaceIP(7)})
	l.Decide(ctx, Subject{Route: "portal", IP: keySpaceIP(7)})
	store.sizes = nil
	l.syncRound(ctx)
	if len(store.sizes) != 1 || store.sizes[0] != 1 {
		t.Fatalf("second round sent %v keys, want [1]", store.sizes)
	}
}

// BenchmarkSync_MemoryPerKey reports the heap a synchronizing replica
// holds per key it remembers (its view and the key's synchronization
// state), after 100 000 distinct keys were hit and sent to a store that
// keeps none of them: SyncKeys × this bounds that memory.
func BenchmarkSync_MemoryPerKey(b *testing.B) {
	const keys = 100_000
	ips := make([]string, keys)
	for i := range ips {
		ips[i] = keySpaceIP(i)
	}
	for b.Loop() {
		store := NewMemoryStore(memoryShards) // one key per shard: the store keeps (almost) nothing
		opts := rulesConfig(burstRule(1000, time.Hour))
		opts.Sync = time.Hour
		l, err := New(opts, testKS, store, prometheus.NewRegistry(), nil)
		if err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		ctx := context.Background()
		for i, ip := range ips {
			l.Decide(ctx, Subject{Route: "portal", IP: ip})
			if i%10_000 == 9_999 {
				l.syncRound(ctx)
			}
		}
		l.syncRound(ctx)
		after := heapInUse()
		b.ReportMetric(float64(after-before)/keys, "B/key")
		runtime.KeepAlive(l)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkDecide_Sync_KeySpace: one burst-rule decision under sync with
// a round every 500 decisions (a 50 ms round at 10 000 requests/s), over
// 10 000 client IPs cycling and over a new IP per decision (the 1 000 000
// key run of docs/performance.md): what a key the replica has not seen
// costs it beyond one it has.
func BenchmarkDecide_Sync_KeySpace(b *testing.B) {
	for _, keys := range []int{10_000, 1_000_000} {
		b.Run(strconv.Itoa(keys), func(b *testing.B) {
			ips := make([]string, keys)
			for i := range ips {
				ips[i] = keySpaceIP(i)
			}
			opts := rulesConfig(burstRule(1000, time.Hour))
			opts.Sync = time.Hour
			l, err := New(opts, testKS, NewMemoryStore(0), prometheus.NewRegistry(), nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Decide(ctx, Subject{Route: "portal", IP: ips[i%keys]})
				if i++; i%500 == 0 {
					l.syncRound(ctx)
				}
			}
		})
	}
}
