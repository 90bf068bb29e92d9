package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// A client well under its limit over two replicas (a request every
// 200 ms, 5 of 10 per window): each window its replicas start the key
// afresh from the share their last exchange reserved, without asking the
// store (an ask per key per window would be a request-path round trip for
// every client at every window's edge). Every request passes.
func TestSync_AKeyUnderItsLimitStartsEachWindowWithoutAnAsk(t *testing.T) {
	t.Parallel()
	run := driveReplicasEvery(t, 2, burstRule(10, time.Second), memoryDrivenStore, 4, []int{0, 25}, 2, 200)
	for w, n := range run.per {
		if n != 5 {
			t.Errorf("window %d passed %d, want all 5", w, n)
		}
	}
	if run.asks != 0 {
		t.Errorf("%v asks over 4 windows of a client under its limit, want none", run.asks)
	}
}

// A fixed-window hit refused for want of a lease is counted in the view
// (as INCR counts it with sync: 0) and spends nothing of the key's lease,
// even when the view's count with it is still within the limit (9 of 10
// counted, the store leaving less than one request per replica).
func TestSync_ARefusedHitSpendsNoLease(t *testing.T) {
	opts := rulesConfig(burstRule(10, time.Second))
	opts.Sync = 50 * time.Millisecond
	l, _ := newTestLimiterWith(t, opts, keyspace.MustNew(servicetest.KeyPrefix(t)), newRegisteringMemory())
	s := l.sync
	h := Hit{Key: "k", Algorithm: FixedWindow, TTL: time.Second, Limit: 10}
	out := make([]Count, 1)
	for range 9 {
		_, _ = s.view.Hit(context.Background(), []Hit{h}, out)
	}
	s.setReplicas(2)
	s.mu.Lock()
	k := s.keys.add(h.Key)
	k.lease, k.spent = 0, 0
	k.refuseUntil = momentOf(s.view.now()).add(time.Second) // the key refused it
	s.mu.Unlock()
	s.countRefused([]Hit{h})
	s.mu.Lock()
	spent := k.spent
	s.mu.Unlock()
	if spent != 0 {
		t.Errorf("a refused hit spent %d of the lease, want 0", spent)
	}
	views := make([]KeyState, 1)
	s.view.snapshot([]Hit{h}, views)
	if views[0].N != 10 {
		t.Errorf("the view counts %d after the refused hit, want 10 (the 9 and it)", views[0].N)
	}
}

// Fresh attack pass 20 (medium): one IP flooding a route whose rules are a
// route-wide fixed window (100 per 2 s) and a per-IP GCRA (20 per 2 s)
// over three replicas, its asks failing under a 30 ms timeout: each of
// its refusals was counted into the route-wide window, which filled, and
// a client at 5 % of it was refused 23 times in 41 (one sync: 0 gateway:
// 0). A refused request counts only into the fixed windows whose own key
// refused it; its other keys are left as they were, whether the refusing
// key is held to a failed ask (wants) or past its lease (refuseUntil).
func TestSync_ARefusalCountsOnlyIntoTheKeyThatRefusedIt(t *testing.T) {
	opts := rulesConfig(burstRule(10, time.Second))
	opts.Sync = 50 * time.Millisecond
	l, _ := newTestLimiterWith(t, opts, keyspace.MustNew(servicetest.KeyPrefix(t)), newRegisteringMemory())
	s := l.sync
	s.setReplicas(3)
	route := Hit{Key: "route", Algorithm: FixedWindow, TTL: 2 * time.Second, Limit: 100}
	ipFixed := Hit{Key: "ip-fixed", Algorithm: FixedWindow, TTL: 2 * time.Second, Limit: 20}
	ipGCRA := Hit{Key: "ip-gcra", Algorithm: GCRA, Period: 2 * time.Second, Limit: 20}
	views := func(hs ...Hit) []int64 {
		out := make([]KeyState, len(hs))
		s.view.snapshot(hs, out)
		n := make([]int64, len(hs))
		for i := range out {
			n[i] = out[i].N
		}
		return n
	}
	out := make([]Count, 1)
	for range 3 { // the route's count before: 3
		_, _ = s.view.Hit(context.Background(), []Hit{route}, out)
	}
	until := momentOf(s.view.now()).add(time.Second)
	s.mu.Lock()
	s.keys.add(route.Key)
	g := s.keys.add(ipGCRA.Key)
	g.wants, g.refuseUntil = true, until // its ask failed
	f := s.keys.add(ipFixed.Key)
	f.refuseUntil = until // past its lease
	s.mu.Unlock()
	for range 5 {
		s.countRefused([]Hit{route, ipGCRA})
	}
	if got := views(route)[0]; got != 3 {
		t.Errorf("the route-wide window counts %d after 5 requests refused by a key held to a failed ask, want 3", got)
	}
	for range 5 {
		s.countRefused([]Hit{route, ipFixed})
	}
	if got := views(route, ipFixed); got[0] != 3 || got[1] != 5 {
		t.Errorf("after 5 requests refused by the IP's fixed window past its lease: route %d (want 3), IP %d (want 5)", got[0], got[1])
	}
}
