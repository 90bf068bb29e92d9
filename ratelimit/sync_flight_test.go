package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// gatedSync is a fleet's store whose exchanges carrying keys, once armed,
// hold until the test releases them: a store answering slowly.
type gatedSync struct {
	*registeringMemory
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *gatedSync) hold(ops []SyncOp) {
	if s.armed.Load() && len(ops) > 0 {
		s.entered <- struct{}{}
		<-s.release
	}
}

func (s *gatedSync) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	s.hold(ops)
	return s.registeringMemory.Sync(ctx, ops, out)
}

func (s *gatedSync) SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (time.Time, int64, error) {
	s.hold(ops)
	return s.registeringMemory.SyncRegister(ctx, ops, out, reg)
}

// Fresh attack pass 14 R-SLOW-2: with a slow store, an ask (on the
// request path) queued behind the round in flight, and requests waited
// 110-340 ms with rate_limits.timeout 30 ms. An ask now waits for the
// exchange in flight only within its own deadline: here the round is held
// by the store until the end of the test, and the request that asks is
// decided (as a failed ask is: held to its lease while the rounds reach
// the store, holdToLease) while that round still holds.
func TestSync_AnAskWaitsForTheRoundInFlightOnlyWithinItsDeadline(t *testing.T) {
	store := &gatedSync{registeringMemory: newRegisteringMemory(), entered: make(chan struct{}, 4), release: make(chan struct{})}
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	opts := rulesConfig(burstRule(20, time.Minute))
	opts.Sync = 50 * time.Millisecond
	ls := manualFleet(t, 2, opts, ks, store) // no early exchange: the round alone holds the store
	ctx := context.Background()
	a := ls[0]
	s := Subject{Route: "portal", IP: "203.0.113.140"}
	for range 10 { // the replica's share of 20 among 2
		if a.Decide(ctx, s).Blocked() {
			t.Fatal("refused within the replica's share")
		}
	}
	store.armed.Store(true)
	roundDone := make(chan struct{})
	go func() {
		defer close(roundDone)
		a.syncRound(ctx)
	}()
	<-store.entered // the round holds the exchange
	asks := counterOf(t, a.sync.asks)
	decided := make(chan struct{})
	var held atomic.Bool
	go func() {
		defer close(decided)
		held.Store(a.Decide(ctx, s).Blocked()) // its share spent: it asks
	}()
	select {
	case <-decided:
	case <-time.After(10 * time.Second): // a guard against a hang, not a measure of speed
		close(store.release)
		t.Fatal("the request's ask waited for the round the store holds")
	}
	select {
	case <-roundDone:
		t.Fatal("the round ended before the store let it: the test proves nothing")
	default:
	}
	if got := counterOf(t, a.sync.asks); got != asks+1 {
		t.Errorf("asks %v → %v, want one more (the request asked)", asks, got)
	}
	close(store.release)
	<-roundDone
	// The ask failed while the rounds reach the store: the request was
	// held to the replica's lease, and the next round asks for the key's
	// lease (the key was not in the round the store held: that round had
	// taken it before the request), so the replica passes again at once.
	if !held.Load() {
		t.Error("the request whose ask failed passed on the view: the replica was not held to its lease")
	}
	store.armed.Store(false)
	a.syncRound(ctx)
	if a.Decide(ctx, s).Blocked() {
		t.Error("refused after a round that could lease the key: the failed ask did not put the key in the next round")
	}
}

// A burst of 40 requests over two real replicas passed 17 of a GCRA
// limit of 10 (10 on one replica; the documented bound is 15): the
// request that asked decided after the requests waiting on its ask were
// let go, so they spent the new lease and the asker passed on the view
// past it, one request beyond the lease at every ask. An ask that leases
// now gives the asker's hit the lease's first request before anyone else
// can take it, on every algorithm.
func TestSync_TheAskersHitIsTheFirstOfItsLease(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			ks := keyspace.MustNew(servicetest.KeyPrefix(t))
			rule := burstRule(10, 3*time.Second)
			rule.Algorithm = alg
			opts := rulesConfig(rule)
			opts.Sync = 50 * time.Millisecond
			store := newRegisteringMemory()
			ls := manualFleet(t, 2, opts, ks, store) // no early exchange: the test sends every call
			a := ls[0]
			ip := "203.0.113.141"
			for range 5 { // the replica's share of 10 among 2
				if a.Decide(context.Background(), Subject{Route: "portal", IP: ip}).Blocked() {
					t.Fatal("refused within the replica's share")
				}
			}
			h := Hit{Key: ks.RateLimit("burst", ip), Algorithm: alg, Limit: 10}
			if alg == FixedWindow {
				h.TTL = 3 * time.Second
			} else {
				h.Period = 3 * time.Second
			}
			refusals, taken := a.sync.ask(context.Background(), []Hit{h}, []int{0})
			decided := refusesRequest([]Hit{h}, refusals)
			a.sync.mu.Lock()
			k, ok := a.sync.keys.get(h.Key)
			var lease, spent int64
			if ok {
				lease, spent = k.lease, k.spent
			}
			a.sync.mu.Unlock()
			// The store holds the replica's 5: floor((10 − 5) / 2) = 2.
			if decided || !ok || lease != 2 {
				t.Fatalf("ask: decided %v, key known %v, lease %d; want a lease of 2 and the hit left to the view", decided, ok, lease)
			}
			if taken&1 == 0 || spent != 1 {
				t.Errorf("after the ask the asker's hit holds taken=%b with %d of the lease spent; want its share taken (bit 0) and 1 spent, before the waiting requests are let go", taken, spent)
			}

			// Through Decide: the asking request counts once, and the
			// lease's second request passes without an ask.
			ip2 := "203.0.113.142"
			s2 := Subject{Route: "portal", IP: ip2}
			for range 5 {
				a.Decide(context.Background(), s2)
			}
			asks := counterOf(t, a.sync.asks)
			for i, wantAsks := range []float64{asks + 1, asks + 1} {
				if a.Decide(context.Background(), s2).Blocked() {
					t.Fatalf("request %d past the share refused; the store leaves 5", i+1)
				}
				a.sync.mu.Lock()
				k, _ := a.sync.keys.get(ks.RateLimit("burst", ip2))
				lease, spent = k.lease, k.spent
				a.sync.mu.Unlock()
				if got := counterOf(t, a.sync.asks); got != wantAsks || lease != 2 || spent != int64(i+1) {
					t.Errorf("request %d past the share: asks %v (want %v), lease %d (want 2), spent %d (want %d)", i+1, got, wantAsks, lease, spent, i+1)
				}
			}
		})
	}
}

// A request that matches more rules than a bit mask holds (65) spends
// one request of each rule's lease, its 65th rule's included (the first
// 64 are marked taken before the view decides; the rest are spent once,
// after it), within its share and on a lease its ask brought.
func TestSync_EveryRuleOfARequestSpendsOneRequestOfItsLease(t *testing.T) {
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	var rules []Rule
	for i := range 65 {
		rules = append(rules, Rule{Name: fmt.Sprintf("r%02d", i), Scope: ScopeIP, Limit: 6, Window: time.Minute, Routes: []string{"*"}})
	}
	opts := rulesConfig(rules...)
	opts.Sync = 50 * time.Millisecond
	store := newRegisteringMemory()
	ls := manualFleet(t, 2, opts, ks, store) // no early exchange: the test sends every call
	a := ls[0]
	s := Subject{Route: "portal", IP: "203.0.113.143"}
	// Three requests spend the share, floor(6 / 2); the fourth asks: the
	// store holds the 3, floor((6 − 3) / 2) = 1 is leased, and the asking
	// request spends it.
	for i, want := range []int64{1, 2, 3, 1} {
		if a.Decide(context.Background(), s).Blocked() {
			t.Fatalf("request %d refused", i+1)
		}
		a.sync.mu.Lock()
		for _, r := range rules {
			k, ok := a.sync.keys.get(ks.RateLimit(r.Name, s.IP))
			switch {
			case !ok:
				t.Errorf("request %d, rule %s: the key is not in the table", i+1, r.Name)
			case k.spent != want:
				t.Errorf("request %d, rule %s: spent %d of its lease, want %d", i+1, r.Name, k.spent, want)
			}
		}
		a.sync.mu.Unlock()
	}
}

// A key whose lease is spent and whose view, merged from the store by a
// round, already holds the limit is refused by the view without an ask:
// the store would only say what the view says, at the cost of a round
// trip on the request path.
func TestSync_AViewAlreadyFullRefusesWithoutAnAsk(t *testing.T) {
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	opts := rulesConfig(burstRule(10, time.Minute))
	opts.Sync = 50 * time.Millisecond
	store := newRegisteringMemory()
	ls := manualFleet(t, 2, opts, ks, store) // no early exchange: the test sends every call
	ctx := context.Background()
	s := Subject{Route: "portal", IP: "203.0.113.145"}
	// Each spends its share, 5, and sends it: B first, so that A's round
	// merges the store's 10 into A's view.
	for _, l := range []*Limiter{ls[1], ls[0]} {
		for range 5 {
			if l.Decide(ctx, s).Blocked() {
				t.Fatal("refused within the replica's share")
			}
		}
		l.syncRound(ctx)
	}
	a := ls[0]
	asks := counterOf(t, a.sync.asks)
	if !a.Decide(ctx, s).Blocked() {
		t.Fatal("the 11th request of a limit of 10 passed")
	}
	if got := counterOf(t, a.sync.asks); got != asks {
		t.Errorf("asks %v → %v: the replica asked the store about a key its view already holds full", asks, got)
	}
}

// Requests a replica counts while its round is on the wire stay in its
// view when the answer is merged: a fixed window's view becomes the
// store's count plus those (3 sent, 2 more while the store held the
// round: 5), not the store's count alone.
func TestSync_HitsCountedWhileARoundIsOnTheWireStayInTheView(t *testing.T) {
	store := &gatedSync{registeringMemory: newRegisteringMemory(), entered: make(chan struct{}, 4), release: make(chan struct{})}
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	opts := rulesConfig(burstRule(20, time.Minute))
	opts.Sync = 50 * time.Millisecond
	ls := manualFleet(t, 2, opts, ks, store) // no early exchange: the test sends every call
	a := ls[0]
	ctx := context.Background()
	s := Subject{Route: "portal", IP: "203.0.113.146"}
	for range 3 {
		a.Decide(ctx, s)
	}
	whileARoundIsHeld(t, a, store, func() { // the round, with the 3, is held by the store
		for range 2 {
			if a.Decide(ctx, s).Blocked() {
				t.Error("refused within the replica's share")
			}
		}
	})
	h := Hit{Key: ks.RateLimit("burst", s.IP), Algorithm: FixedWindow, TTL: time.Minute, Limit: 20}
	views := make([]KeyState, 1)
	a.sync.view.snapshot([]Hit{h}, views)
	if views[0].N != 5 {
		t.Errorf("the view counts %d after the round, want 5 (3 the store holds, 2 counted while it was on the wire)", views[0].N)
	}
}

// The same for a key whose window ended in the view before the round
// took its snapshot (the snapshot absent): the requests counted while the
// round is on the wire open the view's next window, and stay in it.
func TestSync_HitsCountedWhileARoundIsOnTheWireStayInANewWindow(t *testing.T) {
	store := &gatedSync{registeringMemory: newRegisteringMemory(), entered: make(chan struct{}, 4), release: make(chan struct{})}
	var virt atomic.Int64
	virt.Store(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, virt.Load()).UTC() }
	store.SetClock(clock.Func(now))
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	opts := rulesConfig(burstRule(20, time.Second))
	opts.Sync = 50 * time.Millisecond
	opts.Clock = clock.Func(now)
	ls := manualFleet(t, 2, opts, ks, store) // no early exchange: the test sends every call
	a := ls[0]
	ctx := context.Background()
	s := Subject{Route: "portal", IP: "203.0.113.147"}
	for range 3 {
		a.Decide(ctx, s) // dirty, in a window that ends before the round
	}
	virt.Add(int64(1500 * time.Millisecond))
	whileARoundIsHeld(t, a, store, func() {
		for range 2 {
			if a.Decide(ctx, s).Blocked() {
				t.Error("refused in a new window")
			}
		}
	})
	h := Hit{Key: ks.RateLimit("burst", s.IP), Algorithm: FixedWindow, TTL: time.Second, Limit: 20}
	views := make([]KeyState, 1)
	a.sync.view.snapshot([]Hit{h}, views)
	if views[0].N != 2 {
		t.Errorf("the view counts %d after the round, want the 2 counted in the new window while it was on the wire", views[0].N)
	}
}

// whileARoundIsHeld starts a round of a and runs during while store holds
// it (the round has reached the store and waits for its answer), then
// lets it go and waits for it to end.
func whileARoundIsHeld(t *testing.T, a *Limiter, store *gatedSync, during func()) {
	t.Helper()
	store.armed.Store(true)
	roundDone := make(chan struct{})
	go func() {
		defer close(roundDone)
		a.syncRound(context.Background())
	}()
	<-store.entered
	during()
	close(store.release)
	<-roundDone
}
