package ratelimit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// The tests of send's merge of a round's answer into a key's lease state
// (sync.go): the embedded store, its clock driven apart from the
// replicas' (a Redis fixed window ends by its PTTL, in real time).

// skewedFleet builds two replicas on one embedded store: the replicas on
// own, the store on own plus what ahead holds.
func skewedFleet(t *testing.T, rule Rule, own *clock.Manual, ahead *atomic.Int64) (*Limiter, *Limiter, *registeringMemory, keyspace.Keyspace) {
	t.Helper()
	store := newRegisteringMemory()
	store.SetClock(clock.Func(func() time.Time { return own.Now().Add(time.Duration(ahead.Load())) }))
	opts := rulesConfig(rule)
	opts.Sync = 50 * time.Millisecond
	opts.Timeout = time.Second
	opts.Clock = own
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	ls := manualFleet(t, 2, opts, ks, store)
	return ls[0], ls[1], store, ks
}

// passes decides n requests of s on l and returns how many passed.
func passes(l *Limiter, s Subject, n int) int {
	passed := 0
	for range n {
		if !l.Decide(context.Background(), s).Blocked() {
			passed++
		}
	}
	return passed
}

// A replica's round that sends its view with the rest of its lease
// reserved in the store's window W1, answered by a store whose clock ran
// ahead (W1 over there, another replica's window W2 nearly full), keeps
// none of that reservation: the store dropped it with the view's counts,
// so the view adopts W2's count whole and passes only what W2 has left.
// Taking the reservation for kept (the ended-window reset negated, or its
// `reserved > 0` → `<= 0`, or its `Local.End != 0` → `== 0`) subtracted
// it from W2's count, and the replica passed 3 where W2 had 1 left.
func TestSync_ARoundAnsweredWithAnotherWindowKeepsNoReservation(t *testing.T) {
	own := clock.NewManual(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	var ahead atomic.Int64
	a, b, _, _ := skewedFleet(t, burstRule(10, time.Second), own, &ahead)
	s := Subject{Route: "portal", IP: "203.0.113.171"}
	if passes(a, s, 1) != 1 {
		t.Fatal("the first request was refused")
	}
	own.Advance(10 * time.Millisecond)
	a.syncRound(context.Background()) // its view and the 4 left of its share, in W1
	own.Advance(100 * time.Millisecond)
	ahead.Store(int64(time.Second)) // the store's W1 is over; a's view is still in it
	fromB := passes(b, s, 20)
	if fromB < 8 {
		t.Fatalf("the second replica passed %d of 20 in the store's new window, want it near the limit (10): the test proves nothing", fromB)
	}
	if passes(a, s, 1) != 1 { // within its lease, counted in its view of W1
		t.Fatal("a request within the first replica's lease was refused")
	}
	a.syncRound(context.Background()) // that view with its reservation; the answer: W2
	if fromA := passes(a, s, 10); fromB+fromA > 10 {
		t.Errorf("the store's new window passed %d (the second replica %d, then the first %d after its round answered with it), want at most 10", fromB+fromA, fromB, fromA)
	}
}

// A fresh key (a share no exchange reserved yet) whose view's window
// ended before its first round is still fresh after that round: the
// round had no view to send and reserved nothing, so the next round
// reserves what is left of the share in the window the view then counts
// in, and the other replica is leased only the rest. Taken for reserved
// (the round's `reserved > 0` → `>= 0`), the key sent no reservation
// again, and the two replicas passed 12 of 10.
func TestSync_AFreshKeyWhoseViewEndedBeforeItsRoundStaysFresh(t *testing.T) {
	own := clock.NewManual(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	var ahead atomic.Int64
	a, b, _, _ := skewedFleet(t, burstRule(10, time.Second), own, &ahead)
	s := Subject{Route: "portal", IP: "203.0.113.172"}
	if passes(a, s, 1) != 1 {
		t.Fatal("the first request was refused")
	}
	own.Advance(1500 * time.Millisecond)
	a.syncRound(context.Background()) // the view's window is over: nothing to send
	own.Advance(10 * time.Millisecond)
	fromA := passes(a, s, 1)
	a.syncRound(context.Background()) // the view and what is left of the share
	fromB := passes(b, s, 20)
	fromA += passes(a, s, 20)
	if fromA+fromB > 10 {
		t.Errorf("two replicas passed %d of a limit of 10 in one window (the first %d, the second %d)", fromA+fromB, fromA, fromB)
	}
}

// A sliding window's or GCRA's key that asks with its fresh share spent
// (nothing left of it to reserve) and is leased by the store holds that
// lease: its next round sends what is left of it with the view, so the
// store keeps holding it. Taking the lease for held only when something
// was reserved with the ask (the refilling `got.Leased > 0` → `<= 0`)
// sent the view without it and the store gave it back to the others.
func TestSync_ALeaseAskedWithNothingReservedIsHeld(t *testing.T) {
	for _, alg := range []Algorithm{GCRA, SlidingWindow} {
		t.Run(algName(alg), func(t *testing.T) {
			own := clock.NewManual(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
			var ahead atomic.Int64
			rule := burstRule(10, time.Minute)
			rule.Algorithm = alg
			a, _, store, ks := skewedFleet(t, rule, own, &ahead)
			ip := "203.0.113.173"
			s := Subject{Route: "portal", IP: ip}
			passed := passes(a, s, 5) // the fresh share (5 of 10 over two replicas)
			passed += passes(a, s, 1) // an ask, with nothing left to reserve
			if passed != 6 {
				t.Fatalf("passed %d of 6, want all: the test proves nothing", passed)
			}
			h := Hit{Key: ks.RateLimit("burst", ip), Algorithm: alg, TTL: time.Minute, Period: time.Minute, Limit: 10}
			a.sync.mu.Lock()
			k, _ := a.sync.keys.get(h.Key)
			left := k.lease - k.spent
			a.sync.mu.Unlock()
			if left <= 0 {
				t.Fatalf("the ask left a lease of %d, want some: the test proves nothing", left)
			}
			own.Advance(10 * time.Millisecond)
			a.syncRound(context.Background())
			var st [1]KeyState
			at := store.snapshot([]Hit{h}, st[:])
			if got, want := remaining(h, st[0], float64(at.UnixMilli())), h.Limit-int64(passed)-left; got != want {
				t.Errorf("%v: the store leaves %d after the round, want %d (the limit less the %d passed and the %d left of the lease)", alg, got, want, passed, left)
			}
		})
	}
}

// A request that took the last of a fresh share (prepare) and is refused
// by the view after a round ran in between (the round had nothing left
// to reserve, and brought the other replica's counts that fill the key)
// gives its share back: the key is still fresh, its share not reserved
// in the store, and half of it spent, so the give-back starts the early
// exchange that reserves what is left (sync_early.go). Taken for held
// after that round (the refilling `got.Leased > 0` → `>= 0`), it started
// none, and what was left waited unreserved for the next round.
func TestSync_AShareGivenBackAfterARoundThatReservedNothingIsExchangedEarly(t *testing.T) {
	opts := rulesConfig(Rule{Name: "burst", Scope: ScopeIP, Algorithm: GCRA, Limit: 6, Window: time.Minute, Routes: []string{AllRoutes}})
	opts.Sync = 50 * time.Millisecond
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	ls := manualFleet(t, 2, opts, ks, newRegisteringMemory())
	a, b := ls[0], ls[1]
	ip := "203.0.113.175"
	if fromB := passes(b, Subject{Route: "portal", IP: ip}, 20); fromB != 5 {
		t.Fatalf("the other replica passed %d of 20, want 5 (its share of 3, then leases of 1): the test proves nothing", fromB)
	}
	spawned := 0
	a.sync.spawn = func(func()) { spawned++ }
	ctx := context.Background()
	h := []Hit{{Key: ks.RateLimit("burst", ip), Algorithm: GCRA, Limit: 6, Period: time.Minute}}
	r := make([][]Count, 3)
	p := make([]prepared, 3)
	for i := range r {
		r[i] = make([]Count, 1)
		p[i] = a.sync.prepareHit(ctx, h, r[i])
		if i == 0 {
			a.sync.commit(h, r[0], p[0]) // passes: 1 of its share of 3
		}
	}
	// Two more requests took the rest of the share and are not decided
	// yet when the round runs.
	a.syncRound(ctx)
	a.sync.commit(h, r[1], p[1])
	if !r[0][0].Allowed || r[1][0].Allowed {
		t.Fatalf("the first request allowed %v, the second %v: want the first passed and the second refused by the view the round filled", r[0][0].Allowed, r[1][0].Allowed)
	}
	if spawned != 1 {
		t.Errorf("the share given back started %d early exchanges, want 1 (the key is still fresh: its round reserved nothing)", spawned)
	}
}
