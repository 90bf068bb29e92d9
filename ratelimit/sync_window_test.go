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
	s.mu.Unlock()
	s.countRefused([]Hit{h})
	s.mu.Lock()
	spent := k.spent
	s.mu.Unlock()
	if spent != 0 {
		t.Errorf("a refused hit spent %d of the lease, want 0", spent)
	}
}
