package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// lostAnswers is a fleet's store that runs every sync call and then loses
// the answer of one call in every (a connection reset after the store
// ran the script): the call merged, the replica never hears it did.
type lostAnswers struct {
	RegisteringSyncer
	Store
	every int64
	calls atomic.Int64
	lost  atomic.Int64
	// running: the fleet is registered (lose answers only from then on).
	running atomic.Bool
}

func (s *lostAnswers) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	now, _, err := s.SyncRegister(ctx, ops, out, Registration{})
	return now, err
}

func (s *lostAnswers) SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (time.Time, int64, error) {
	now, n, err := s.RegisteringSyncer.SyncRegister(ctx, ops, out, reg)
	if err == nil && len(ops) > 0 && s.running.Load() && s.calls.Add(1)%s.every == 0 {
		s.lost.Add(1)
		return time.Time{}, 0, errors.New("read tcp 127.0.0.1:6379: connection reset by peer")
	}
	return now, n, err
}

// lostAnswersStore makes a drivenStore that loses one answer in every of
// a fleet's store: the embedded one (registeringMemory, every algorithm)
// or a real Redis (its clock pinned; sliding window and GCRA, as the
// other driven Redis runs), keeping it in *got.
func lostAnswersStore(redis bool, every int64, got **lostAnswers) drivenStore {
	return func(t *testing.T) (Store, keyspace.Keyspace, func(time.Time)) {
		prefix := servicetest.KeyPrefix(t)
		if redis {
			s := NewRedisStore(testRedis(t, prefix))
			*got = &lostAnswers{RegisteringSyncer: s, Store: s, every: every}
			return *got, keyspace.MustNew(prefix), func(now time.Time) { pinStoreClock(s, now); (*got).running.Store(true) }
		}
		s := newRegisteringMemory()
		var at atomic.Int64
		s.SetClock(clock.Func(func() time.Time { return time.Unix(0, at.Load()).UTC() }))
		*got = &lostAnswers{RegisteringSyncer: s, Store: s, every: every}
		return *got, keyspace.MustNew(prefix), func(now time.Time) { at.Store(now.UnixNano()); (*got).running.Store(true) }
	}
}

// Fresh attack pass 17 R-LOSS: with a fifth of the store's answers lost
// (connections reset after Redis ran the script), a client at 60 % of its
// limit over three replicas was refused 47-49 of 121 requests: a call
// that merged but whose answer was lost was sent again as a new call from
// the same base, so the replica's passes, and the lease the store had
// reserved for it, counted twice, and the window filled with passes
// nobody made. A lost call is now resolved, by its marker, before its
// keys go again: merged once, its lease handed to the replica.
//
// Three replicas, one answer in every 3 and in every 7 lost, on the
// embedded store and on a real Redis: a client at 60 % and 90 % of the
// limit is never refused (a sliding window: at most 2 a window, its edge's
// residue with no answer lost, docs/rate-limiting.md Known gaps (5): 1 at
// 90 % here), and a flood passes at most the limit + 5 in
// every window (GCRA: what one replica passes + 5) and at least what one
// replica passes − 5.
func TestSync_ALostAnswerIsNotCountedTwice(t *testing.T) {
	t.Parallel()
	const limit, window, windows, slack = 50, time.Second, 4, 5
	for _, onRedis := range []bool{false, true} {
		for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
			if onRedis && alg == FixedWindow {
				continue // Redis ends a fixed window by its PTTL, in real time
			}
			for _, every := range []int64{3, 7} {
				name := fmt.Sprintf("memory/%v/lose1in%d", alg, every)
				if onRedis {
					name = fmt.Sprintf("go-redis/%v/lose1in%d", alg, every)
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					rule := burstRule(limit, window)
					rule.Algorithm = alg
					for _, pace := range []int{33, 22} { // 30 and 45 requests a window
						var store *lostAnswers
						run := driveReplicasTuned(t, 3, rule, lostAnswersStore(onRedis, every, &store), windows, []int{10, 27, 44}, 1, pace, 0, nil)
						sent := make([]int, windows)
						for ms := 0; ms < windows*int(window/time.Millisecond); ms += pace {
							sent[ms/int(window/time.Millisecond)]++
						}
						t.Logf("a client every %d ms: sent per window %v, passed %v (%d answers lost)", pace, sent, run.per, store.lost.Load())
						if store.lost.Load() == 0 {
							t.Fatal("no answer was lost: the test proves nothing")
						}
						for i := range sent {
							if run.per[i] < sent[i]-edgeResidue(alg) {
								t.Errorf("a client every %d ms: window %d passed %d of %d, want every request (the client is under its limit; a sliding window: all but %d)", pace, i, run.per[i], sent[i], edgeResidue(alg))
							}
						}
					}
					var alone, store *lostAnswers
					one := driveReplicas(t, 1, rule, lostAnswersStore(onRedis, every, &alone), windows, []int{10}, 1)
					three := driveReplicas(t, 3, rule, lostAnswersStore(onRedis, every, &store), windows, []int{10, 27, 44}, 1)
					t.Logf("a flood: one replica %v (%d answers lost); three %v (%d answers lost)", one.per, alone.lost.Load(), three.per, store.lost.Load())
					for i, got := range three.per {
						if bound := windowBound(alg, limit, one.per[i], slack); got > bound {
							t.Errorf("a flood: window %d passed %d, want ≤ %d", i, got, bound)
						}
						if got < one.per[i]-slack {
							t.Errorf("a flood: window %d passed %d, want ≥ %d (one replica %d − %d)", i, got, one.per[i]-slack, one.per[i], slack)
						}
					}
				})
			}
		}
	}
}

// edgeResidue is how many requests of a client under its limit a window
// may refuse with three replicas: none, but on a sliding window the
// residue at its edge (docs/rate-limiting.md, Known gaps (5)).
func edgeResidue(alg Algorithm) int {
	if alg == SlidingWindow {
		return 2
	}
	return 0
}

// The exchange marker on every store that runs the sync script (go-redis,
// Upstash REST, a Redis Cluster): a marked call that ran, sent again to
// resolve it, merges nothing and answers what it leased; a marked call
// that never ran, resolved, answers Leased -1 and stops the call from ever
// merging; a marked call sent twice as it is merges once; a marked call
// that reaches the store past its last moment (Registration.NotAfter)
// never runs. Every algorithm, three keys per call (one per call on the
// cluster).
func TestSyncMarker_ACallMergesOnceOnEveryStore(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	ks := keyspace.MustNew(prefix)
	rest := restStoreOn(t, rdb)
	stores := map[string]RegisteringSyncer{"go-redis": NewRedisStore(rdb), "rest": rest}
	if !testing.Short() {
		stores["cluster"] = NewRedisStore(testRedisCluster(t, prefix))
	}
	ctx := context.Background()
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			ops := func(tag string) []SyncOp {
				var out []SyncOp
				for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
					h := Hit{Key: ks.RateLimit(name+tag+alg.String(), "203.0.113.7"), Algorithm: alg, TTL: time.Minute, Period: time.Minute, Limit: 30}
					out = append(out, SyncOp{Hit: h, Local: nowView(h, 3), LeaseAmong: 3})
				}
				return out
			}
			reg := func(ex string, resolve bool) Registration {
				return Registration{Exchange: ks.RateLimitExchange(name) + ex, ExchangeTTL: time.Minute, Resolve: resolve}
			}
			// Ran, then resolved: the same state, the same leases.
			first := ops("ran")
			got := make([]KeyState, len(first))
			if _, _, err := s.SyncRegister(ctx, first, got, reg("1", false)); err != nil {
				t.Fatal(err)
			}
			again := make([]KeyState, len(first))
			if _, _, err := s.SyncRegister(ctx, first, again, reg("1", true)); err != nil {
				t.Fatal(err)
			}
			twice := make([]KeyState, len(first))
			if _, _, err := s.SyncRegister(ctx, first, twice, reg("1", false)); err != nil {
				t.Fatal(err)
			}
			for i, op := range first {
				if got[i].Leased != 9 { // floor((30 − 3) / 3)
					t.Errorf("%v: leased %d, want 9", op.Hit.Algorithm, got[i].Leased)
				}
				if again[i].Leased != got[i].Leased || twice[i].Leased != got[i].Leased {
					t.Errorf("%v: resolved leased %d, sent twice %d, want the first call's %d", op.Hit.Algorithm, again[i].Leased, twice[i].Leased, got[i].Leased)
				}
				if !sameCount(op.Hit, again[i], got[i]) || !sameCount(op.Hit, twice[i], got[i]) {
					t.Errorf("%v: the first call answered %+v, resolved %+v, sent twice %+v: want one merge", op.Hit.Algorithm, got[i], again[i], twice[i])
				}
			}
			// Never ran, resolved: Leased -1, and the late first call merges nothing.
			late := ops("late")
			res := make([]KeyState, len(late))
			if _, _, err := s.SyncRegister(ctx, late, res, reg("2", true)); err != nil {
				t.Fatal(err)
			}
			after := make([]KeyState, len(late))
			if _, _, err := s.SyncRegister(ctx, late, after, reg("2", false)); err != nil {
				t.Fatal(err)
			}
			for i, op := range late {
				if res[i].Leased != -1 {
					t.Errorf("%v: a call that never ran resolved as %+v, want Leased -1", op.Hit.Algorithm, res[i])
				}
				if after[i].present() || after[i].Leased != 0 {
					t.Errorf("%v: the late first call of a resolved call answered %+v, want nothing merged", op.Hit.Algorithm, after[i])
				}
			}
			// Too late: a call reaching the store past its last moment
			// (fresh attack pass 18 R02: a request delayed on the
			// network past its marker's lifetime merged again) runs not,
			// then or later, and resolves as never run.
			old := ops("old")
			lateReg := reg("3", false)
			lateReg.NotAfter = time.Now().Add(-time.Second)
			tooLate := make([]KeyState, len(old))
			if _, _, err := s.SyncRegister(ctx, old, tooLate, lateReg); err != nil {
				t.Fatal(err)
			}
			again2 := make([]KeyState, len(old))
			if _, _, err := s.SyncRegister(ctx, old, again2, reg("3", false)); err != nil {
				t.Fatal(err)
			}
			resolved := make([]KeyState, len(old))
			if _, _, err := s.SyncRegister(ctx, old, resolved, reg("3", true)); err != nil {
				t.Fatal(err)
			}
			for i, op := range old {
				if tooLate[i].Leased != -1 || again2[i].present() || resolved[i].Leased != -1 {
					t.Errorf("%v: a call past its last moment answered %+v, sent again %+v, resolved %+v; want Leased -1, nothing merged, Leased -1", op.Hit.Algorithm, tooLate[i], again2[i], resolved[i])
				}
			}
			// A fixed window's call resolved after its window is over:
			// neither its view nor its lease is in the state answered
			// (Ended); resolved within it, both are, a call that leased
			// nothing included (fresh attack pass 18 R01).
			for i, among := range []int64{3, 0} {
				h := Hit{Key: ks.RateLimit(name+"ended"+strconv.Itoa(i), "203.0.113.7"), Algorithm: FixedWindow, TTL: 300 * time.Millisecond, Limit: 30}
				op := []SyncOp{{Hit: h, Local: KeyState{N: 3, TTL: h.TTL}, LeaseAmong: among}}
				ran, within, over := make([]KeyState, 1), make([]KeyState, 1), make([]KeyState, 1)
				ex := "ended" + strconv.Itoa(i)
				if _, _, err := s.SyncRegister(ctx, op, ran, reg(ex, false)); err != nil {
					t.Fatal(err)
				}
				if _, _, err := s.SyncRegister(ctx, op, within, reg(ex, true)); err != nil {
					t.Fatal(err)
				}
				for float64(time.Now().UnixMilli()) <= ran[0].End+5 {
					time.Sleep(10 * time.Millisecond) // until the window has ended (the store's clock is this machine's)
				}
				if _, _, err := s.SyncRegister(ctx, op, over, reg(ex, true)); err != nil {
					t.Fatal(err)
				}
				if within[0].Ended || within[0].Leased != ran[0].Leased || within[0].N != ran[0].N {
					t.Errorf("lease among %d: resolved within its window: %+v, want the first answer %+v, not ended", among, within[0], ran[0])
				}
				if !over[0].Ended || over[0].Leased != 0 || over[0].present() {
					t.Errorf("lease among %d: resolved after its window: %+v, want Ended, nothing leased, no state", among, over[0])
				}
			}
			if ttl := rdb.PTTL(ctx, ks.RateLimitExchange(name)+"2:0").Val(); name != "cluster" && (ttl <= 0 || ttl > time.Minute) {
				t.Errorf("marker TTL %v, want in (0, 1m]", ttl)
			}
		})
	}
}

// nowView is a view of n passes of h counted now (store clock).
func nowView(h Hit, n int64) KeyState {
	now := float64(time.Now().UnixMilli())
	switch h.Algorithm {
	case GCRA:
		return KeyState{TAT: now + float64(n)*float64(h.Period.Milliseconds())/float64(h.Limit), TTL: h.Period}
	case SlidingWindow:
		return KeyState{Index: float64(int64(now) / h.Period.Milliseconds()), Cur: float64(n), TTL: 2 * h.Period}
	default:
		return KeyState{N: n, TTL: h.TTL}
	}
}

// sameCount reports whether two answers for h hold the same count (a
// GCRA's TAT within a millisecond: TIME moves between the calls).
func sameCount(h Hit, a, b KeyState) bool {
	switch h.Algorithm {
	case GCRA:
		return a.TAT-b.TAT < 1 && b.TAT-a.TAT < 1
	case SlidingWindow:
		return a.Index == b.Index && a.Cur == b.Cur && a.Prev == b.Prev
	default:
		return a.N == b.N && a.End-b.End < 2 && b.End-a.End < 2
	}
}

// A cluster call's marker shares its op key's hash slot: the part of the
// key Redis Cluster hashes, in braces, or no marker when no name can
// carry it (CLUSTER KEYSLOT's rule: the first '{', the first '}' after it,
// not empty between).
func TestExchangeMarkerSharesTheKeysSlot(t *testing.T) {
	t.Parallel()
	reg := Registration{Exchange: "olp:rlsync:x:r:5"}
	for _, tt := range []struct{ key, want string }{
		{"olp:rl:burst:203.0.113.7", "olp:rlsync:x:r:5:0:{olp:rl:burst:203.0.113.7}"},
		{"olp:rl:user:{u-42}:x", "olp:rlsync:x:r:5:0:{u-42}"},
		{"olp:rl:user:a{b{c}d", "olp:rlsync:x:r:5:0:{b{c}"},
		{"olp:rl:user:{}:x", ""},  // '{}' hashes the whole key, which holds a '}'
		{"olp:rl:user:{}{z}", ""}, // the first '{' has an empty tag: the whole key, with '}'
		{"olp:rl:user:a}b", ""},
		{"olp:rl:user:x{", "olp:rlsync:x:r:5:0:{olp:rl:user:x{}"},
	} {
		if got := exchangeMarker(reg, 0, true, tt.key); got != tt.want {
			t.Errorf("exchangeMarker(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
	if got := exchangeMarker(reg, 2, false, "olp:rl:user:a}b"); got != "olp:rlsync:x:r:5:2" {
		t.Errorf("outside a cluster the marker is the exchange and the call's index, got %q", got)
	}
	if got := exchangeMarker(Registration{}, 0, false, "k"); got != "" {
		t.Errorf("an unmarked call got marker %q", got)
	}
}

// loseNext is a fleet's store that loses the answer of the next call when
// lose is set (the call runs; a connection reset after it).
type loseNext struct {
	*registeringMemory
	lose atomic.Bool
}

func (s *loseNext) SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (time.Time, int64, error) {
	now, n, err := s.registeringMemory.SyncRegister(ctx, ops, out, reg)
	if err == nil && s.lose.CompareAndSwap(true, false) {
		return time.Time{}, 0, errors.New("read tcp 127.0.0.1:6379: connection reset by peer")
	}
	return now, n, err
}

// Fresh attack pass 18 R01 (one of its causes): a round that sent a fresh
// share's view with the lease left of it ran, its answer was lost, and it
// was resolved after that fixed window had ended. The replica took the
// lease left for reserved in the window the answer showed, where the
// store had never reserved it, and passed it there without asking while
// the others leased the whole limit. Resolved after its window, a call
// now leaves its replica no lease there: the next hit asks.
func TestSync_ACallResolvedAfterItsWindowLeavesNoLease(t *testing.T) {
	t.Parallel()
	const limit, window = 48, time.Second
	store := &loseNext{registeringMemory: newRegisteringMemory()}
	var virt atomic.Int64
	now := func() time.Time { return time.Unix(0, virt.Load()).UTC() }
	store.SetClock(clock.Func(now))
	virt.Store(driveStart.UnixNano())
	opts := rulesConfig(burstRule(limit, window))
	opts.Sync = 50 * time.Millisecond
	opts.Timeout = time.Second
	opts.Clock = clock.Func(now)
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	ls := manualFleet(t, 3, opts, ks, store)
	ctx := context.Background()
	a, s := ls[0], Subject{Route: "portal", IP: "203.0.113.72"}
	virt.Add(int64(100 * time.Millisecond))
	for range 5 {
		if a.Decide(ctx, s).Blocked() {
			t.Fatal("a request of a fresh share was refused")
		}
	}
	store.lose.Store(true)
	a.syncRound(ctx) // runs (the view and the 11 left reserved), its answer lost
	if store.lose.Load() || len(a.sync.parked) != 1 {
		t.Fatalf("the round's answer was not lost (parked calls: %d)", len(a.sync.parked))
	}
	virt.Add(int64(window + 100*time.Millisecond)) // that window is over
	a.syncRound(ctx)                               // resolves the call
	if n := len(a.sync.parked); n != 0 {
		t.Fatalf("%d calls still parked after a round with the store answering", n)
	}
	asks := counterOf(t, a.sync.asks)
	if a.Decide(ctx, s).Blocked() {
		t.Fatal("the first request of the next window was refused")
	}
	if got := counterOf(t, a.sync.asks) - asks; got != 1 {
		t.Errorf("the first request after the call was resolved asked %v times, want 1 (no lease of the replica is reserved in the new window)", got)
	}
}
