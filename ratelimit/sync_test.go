package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// syncRules are one rule of each kind: a fixed window on the IP, a
// clock-aligned one on the user with an observe_limit, a GCRA on the
// school and a sliding window on the route in observe mode.
func syncRules() Options {
	return rulesConfig(
		Rule{Name: "burst", Scope: ScopeIP, Limit: 5, Window: 5 * time.Second, Routes: []string{AllRoutes}},
		Rule{Name: "api", Scope: ScopeUser, Limit: 12, ObserveLimit: 8, Window: time.Minute, Routes: []string{AllRoutes}},
		Rule{Name: "escola", Scope: ScopeEscola, Algorithm: GCRA, Limit: 6, Window: 3 * time.Second, Routes: []string{AllRoutes}},
		Rule{Name: "upload", Scope: ScopeRoute, Algorithm: SlidingWindow, Mode: Observe, Limit: 9, Window: 2 * time.Second, Routes: []string{AllRoutes}},
	)
}

// A replica alone decides in sync mode exactly as with a store round trip
// per request: the same outcomes, remaining counts, resets and retries
// over a random sequence on one injected clock, with sync rounds between
// the requests (the seed runs one gateway).
func TestSync_OneReplicaDecidesExactlyAsTheRoundTrip(t *testing.T) {
	t.Parallel()
	virt := time.Date(2026, 12, 1, 10, 20, 50, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return virt }
	exactStore, syncStore := NewMemoryStore(0), NewMemoryStore(0)
	exactStore.SetClock(clockFunc(clock))
	syncStore.SetClock(clockFunc(clock))
	ks := keyspace.MustNew("olp-dev:sync1:")
	exact, _ := newTestLimiterWith(t, withClock(syncRules(), clock), ks, exactStore)
	opts := syncRules()
	opts.Sync = 50 * time.Millisecond
	synced, _ := newTestLimiterWith(t, withClock(opts, clock), ks, syncStore)
	rng := rand.New(rand.NewPCG(17, 4))
	subjects := []Subject{
		{Route: "portal", IP: "192.0.2.1", User: "u-1", Escola: "e-1"},
		{Route: "portal", IP: "192.0.2.2", User: "u-1", Escola: "e-1"},
		{Route: "api", IP: "192.0.2.1", User: "u-2", Escola: "e-1"},
		{Route: "api", IP: "192.0.2.3"},
	}
	ctx := context.Background()
	seen := map[Outcome]int{}
	for i := range 3000 {
		mu.Lock()
		virt = virt.Add(time.Duration(rng.IntN(120)) * time.Millisecond)
		mu.Unlock()
		if rng.IntN(4) == 0 {
			if _, _, err := synced.sync.round(ctx); err != nil {
				t.Fatal(err)
			}
		}
		s := subjects[rng.IntN(len(subjects))]
		want, got := exact.Decide(ctx, s), synced.Decide(ctx, s)
		if fmt.Sprintf("%+v", want) != fmt.Sprintf("%+v", got) {
			t.Fatalf("request %d (%+v) at %s:\n exact %+v\n  sync %+v", i, s, clock().Format(time.StampMilli), want, got)
		}
		for _, d := range got.Decisions {
			seen[d.Outcome]++
		}
	}
	for _, o := range []Outcome{OutcomeAllow, OutcomeBlock, OutcomeWouldBlock, OutcomeSkip} {
		if seen[o] == 0 {
			t.Errorf("no %s decision in the sequence (%v): it proves too little", o, seen)
		}
	}
}

// newTestLimiterWith is newTestLimiter with opts.
func newTestLimiterWith(t testing.TB, opts Options, ks keyspace.Keyspace, store Store) (*Limiter, error) {
	t.Helper()
	l, err := New(opts, ks, store, prometheus.NewRegistry(), testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l, nil
}

// The sync script merges as the embedded store does (mergeState), on
// every store: a replica's view alone, the counts of two replicas added,
// and an expired base that no longer counts.
func TestSyncConformance_StoresMergeAlike(t *testing.T) {
	for name, mk := range conformanceStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := firstViews(t, mk, "192.0.2.1")
			syncer, nowMS, idx := f.syncer, f.nowMS, f.idx
			fixed, gcra, sliding := f.ops[0].Hit, f.ops[1].Hit, f.ops[2].Hit
			ctx := context.Background()
			got, want := f.got, f.want
			checkStates(t, "replica A alone", got, want)
			// Replica B counted 2 more on each from nothing it had read.
			b := []SyncOp{
				{Hit: fixed, Local: KeyState{N: 2, TTL: 5 * time.Second}},
				{Hit: gcra, Local: KeyState{TAT: nowMS + 2000, TTL: 2 * time.Second}},
				{Hit: sliding, Local: KeyState{Index: idx, Cur: 2, TTL: 20 * time.Second}},
			}
			if _, err := syncer.Sync(ctx, b, got); err != nil {
				t.Fatal(err)
			}
			want = []KeyState{
				{N: 5, TTL: 4 * time.Second},
				{TAT: nowMS + 5000, TTL: 5 * time.Second},
				{Index: idx, Cur: 5, Prev: 1, TTL: want[2].TTL},
			}
			checkStates(t, "A and B added", got, want)
			// A again, from what it read after its round (the stored state
			// then): one more hit each.
			a2 := []SyncOp{
				{Hit: fixed, Base: KeyState{N: 3, End: nowMS + 4000, TTL: 4 * time.Second}, Local: KeyState{N: 4, End: nowMS + 4000, TTL: 4 * time.Second}},
				{Hit: gcra, Base: KeyState{TAT: nowMS + 3000, TTL: 3 * time.Second}, Local: KeyState{TAT: nowMS + 4000, TTL: 4 * time.Second}},
				{Hit: sliding, Base: KeyState{Index: idx, Cur: 3, Prev: 1, TTL: want[2].TTL}, Local: KeyState{Index: idx, Cur: 4, Prev: 1, TTL: want[2].TTL}},
			}
			if _, err := syncer.Sync(ctx, a2, got); err != nil {
				t.Fatal(err)
			}
			want = []KeyState{
				{N: 6, TTL: 4 * time.Second},
				{TAT: nowMS + 6000, TTL: 6 * time.Second},
				{Index: idx, Cur: 6, Prev: 1, TTL: want[2].TTL},
			}
			checkStates(t, "A's second round", got, want)
			// D asks among 3 replicas, from what A read (nothing new of its
			// own): the store reserves floor(remaining / 3) in the merged
			// state and answers it. GCRA: 4 left of 10 → 1, the TAT one
			// interval (1 s) further; sliding: 10 − (1 × 1 + 6) = 3 left →
			// 1, added to the current window.
			d := []SyncOp{
				{Hit: gcra, Base: want[1], Local: want[1], LeaseAmong: 3},
				{Hit: sliding, Base: want[2], Local: want[2], LeaseAmong: 3},
			}
			asked := make([]KeyState, 2)
			if _, err := syncer.Sync(ctx, d, asked); err != nil {
				t.Fatal(err)
			}
			wantAsked := []KeyState{
				{TAT: nowMS + 7000, Leased: 1, TTL: 7 * time.Second},
				{Index: idx, Cur: 7, Prev: 1, Leased: 1, TTL: want[2].TTL},
			}
			for i := range wantAsked {
				if asked[i] != wantAsked[i] {
					t.Errorf("D's ask: key %d = %+v, want %+v", i, asked[i], wantAsked[i])
				}
			}
			// C still counts in a window that ended a window earlier: its
			// counts are not carried into the store's window, which it
			// reads back (its end included).
			c := []SyncOp{{Hit: fixed, Base: KeyState{N: 1, End: nowMS - 1000, TTL: time.Second}, Local: KeyState{N: 9, End: nowMS - 1000, TTL: time.Second}}}
			if _, err := syncer.Sync(ctx, c, got[:1]); err != nil {
				t.Fatal(err)
			}
			checkStates(t, "a window that ended", got[:1], want[:1])
			if end := got[0].End; end <= nowMS+3000 || end > nowMS+4000 {
				t.Errorf("the stored window ends at now + %v ms, want its end (now + 4 s, less what passed)", end-nowMS)
			}
		})
	}
}

// checkStates compares sync results; a fixed window's TTL is the store's
// real PTTL on Redis, so it is only bounded.
func checkStates(t *testing.T, what string, got, want []KeyState) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if i == 0 {
			if g.N != w.N || g.TTL <= 0 || g.TTL > w.TTL {
				t.Errorf("%s: fixed %+v, want N %d and 0 < TTL ≤ %v", what, g, w.N, w.TTL)
			}
			continue
		}
		if g != w {
			t.Errorf("%s: key %d = %+v, want %+v", what, i, g, w)
		}
	}
}

// Three replicas on one real Redis, each sending k requests per sync
// interval for one IP: together they pass at most limit + (N − 1) × k in
// the window (the overshoot bound of docs/rate-limiting.md,
// "Synchronization"), and at least the limit less what leasing cannot
// split among them (N − 1).
func TestSync_ThreeReplicasOvershootAtMostTheBound(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	ks := keyspace.MustNew(prefix)
	const (
		replicas = 3
		limit    = 100
		k        = 10 // requests per replica per interval (rate × interval)
	)
	opts := rulesConfig(burstRule(limit, time.Minute))
	opts.Sync = 50 * time.Millisecond
	opts.Timeout = time.Second // a loaded machine must not fail a round
	ls := make([]*Limiter, replicas)
	for i := range ls {
		ls[i], _ = newTestLimiterWith(t, opts, ks, NewRedisStore(rdb))
	}
	ctx := context.Background()
	// Every replica counts the others before the flood: an arrival during
	// it cuts the leases taken before (TestSync_AReplicaJoiningCutsTheLeasesTakenAlone),
	// which this test of the steady bound does not measure.
	for deadline := time.Now().Add(10 * time.Second); ; {
		all := true
		for _, l := range ls {
			if _, _, err := l.sync.round(ctx); err != nil {
				t.Fatal(err)
			}
			all = all && l.sync.replicas.Load() == replicas
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replicas did not count each other")
		}
	}
	s := Subject{Route: "portal", IP: "203.0.113.77"}
	passed := 0
	for interval := 0; interval < 3*limit/(replicas*k); interval++ {
		for _, l := range ls {
			for range k {
				if !l.Decide(ctx, s).Blocked() {
					passed++
				}
			}
		}
		for _, l := range ls {
			if _, _, err := l.sync.round(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	bound := limit + (replicas-1)*k
	t.Logf("%d replicas, %d requests each per interval: %d passed against a limit of %d (bound %d)", replicas, k, passed, limit, bound)
	if passed < limit-(replicas-1) || passed > bound {
		t.Fatalf("passed %d, want within [%d, %d]", passed, limit-(replicas-1), bound)
	}
	n, err := rdb.Get(ctx, ks.RateLimit("burst", s.IP)).Int64()
	if err != nil || n < int64(passed) {
		t.Fatalf("stored count %d (%v), want at least the %d passed", n, err, passed)
	}
}

// A failed round keeps deciding locally and sends the counts with the
// next round that succeeds; it is counted.
func TestSync_FailedRoundKeepsCountsForTheNext(t *testing.T) {
	t.Parallel()
	store := &failingSyncStore{MemoryStore: NewMemoryStore(0)}
	opts := rulesConfig(burstRule(3, time.Minute))
	opts.Sync = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	l, err := New(opts, testKS, store, reg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := Subject{Route: "portal", IP: "198.51.100.5"}
	l.Decide(ctx, s)
	l.Decide(ctx, s)
	store.fail = true
	l.syncRound(ctx)
	if v := l.Decide(ctx, s); v.Blocked() {
		t.Fatalf("3rd request during the outage: %s", outcomes(v))
	}
	if v := l.Decide(ctx, s); !v.Blocked() {
		t.Fatalf("4th request during the outage: %s, want block (decided locally)", outcomes(v))
	}
	store.fail = false
	l.syncRound(ctx)
	var out [1]KeyState
	store.MemoryStore.snapshot([]Hit{{Key: testKS.RateLimit("burst", s.IP), Algorithm: FixedWindow, TTL: time.Minute}}, out[:])
	if out[0].N != 4 {
		t.Fatalf("stored count after the outage = %d, want 4", out[0].N)
	}
	if got := counterValue(t, reg, "borda_ratelimit_sync_rounds_total", map[string]string{"result": "error"}); got != 1 {
		t.Fatalf("failed rounds counted = %v, want 1", got)
	}
}

type failingSyncStore struct {
	*MemoryStore
	fail bool
}

func (s *failingSyncStore) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	if s.fail {
		return time.Time{}, errInjected
	}
	return s.MemoryStore.Sync(ctx, ops, out)
}

// A store that cannot synchronize is refused with rate_limits.sync.
func TestNew_RefusesSyncOnAStoreWithoutSync(t *testing.T) {
	t.Parallel()
	opts := rulesConfig(burstRule(3, time.Minute))
	opts.Sync = 50 * time.Millisecond
	if _, err := New(opts, testKS, &countingStore{Store: NewMemoryStore(0)}, prometheus.NewRegistry(), nil); err == nil {
		t.Fatal("a store without Sync accepted")
	}
}

// A started Limiter sends its counts within an interval, and Stop sends
// the last interval's.
func TestSync_StartedLimiterSendsItsCountsAndStopTheLast(t *testing.T) {
	t.Parallel()
	for _, interval := range []time.Duration{20 * time.Millisecond, time.Hour} {
		store := NewMemoryStore(0)
		opts := rulesConfig(burstRule(100, time.Minute))
		opts.Sync = interval
		l, _ := newTestLimiterWith(t, opts, testKS, store)
		ctx := context.Background()
		if err := l.Start(ctx); err != nil {
			t.Fatal(err)
		}
		s := Subject{Route: "portal", IP: "198.51.100.9"}
		for range 3 {
			l.Decide(ctx, s)
		}
		stored := func() int64 {
			var out [1]KeyState
			store.snapshot([]Hit{{Key: testKS.RateLimit("burst", s.IP), Algorithm: FixedWindow, TTL: time.Minute}}, out[:])
			return out[0].N
		}
		if interval < time.Hour {
			for deadline := time.Now().Add(5 * time.Second); stored() != 3; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("sync %s: stored %d after 5s, want 3", interval, stored())
				}
			}
		}
		l.Decide(ctx, s)
		if err := l.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if n := stored(); n != 4 {
			t.Fatalf("sync %s: stored %d after Stop, want 4", interval, n)
		}
	}
}
