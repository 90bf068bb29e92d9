package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// farStore is a store (its clock offset from the replica's, as the test
// sets it) that takes toStore of the replica's clock to receive a call and
// back to answer it (on the test's manual clock).
type farStore struct {
	*registeringMemory
	own           *clock.Manual
	toStore, back time.Duration
}

func (s *farStore) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	s.own.Advance(s.toStore)
	at, err := s.registeringMemory.Sync(ctx, ops, out)
	s.own.Advance(s.back)
	return at, err
}

func (s *farStore) SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (time.Time, int64, error) {
	s.own.Advance(s.toStore)
	at, n, err := s.registeringMemory.SyncRegister(ctx, ops, out, reg)
	s.own.Advance(s.back)
	return at, n, err
}

// A synchronizing replica's estimate of the store's clock is never behind
// it, whichever way of the round trip takes the time (fresh attack pass
// 14 follow-up): the view books a pass into the store's window by that
// estimate, and behind it a sliding window's view counted the first
// passes of each window into the one before (58-72 of a limit of 50 with
// a store 25 ms away). Taking the answer's arrival (at − answered) is
// 25 ms behind when the answer's way takes it all; the midpoint of the
// round trip 12.5 ms behind. The estimate is ahead by at most the
// request's way.
func TestSync_TheStoreClockIsNeverEstimatedBehindIt(t *testing.T) {
	for _, ways := range [][2]time.Duration{{0, 25 * time.Millisecond}, {5 * time.Millisecond, 20 * time.Millisecond}, {12500 * time.Microsecond, 12500 * time.Microsecond}, {25 * time.Millisecond, 0}} {
		own := clock.NewManual(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
		const offset = 3 * time.Second
		store := &farStore{registeringMemory: newRegisteringMemory(), own: own, toStore: ways[0], back: ways[1]}
		store.SetClock(clock.Func(func() time.Time { return own.Now().Add(offset) }))
		opts := rulesConfig(burstRule(50, time.Second))
		opts.Sync = 50 * time.Millisecond
		opts.Clock = own
		l, _ := newTestLimiterWith(t, opts, keyspace.MustNew(servicetest.KeyPrefix(t)), store)
		l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.61"})
		l.syncRound(context.Background())
		ahead := l.storeNow().Sub(own.Now().Add(offset))
		if ahead < 0 || ahead > ways[0] {
			t.Errorf("request way %v, answer way %v: the estimate of the store's clock is %v ahead of it, want within [0, %v]", ways[0], ways[1], ahead, ways[0])
		}
	}
}

// skewProbe builds a Limiter on own whose store is 3 s ahead: sample
// feeds learnSkew a call whose request took way to reach the store, and
// ahead is how far the Limiter's estimate of the store's clock is ahead
// of the truth.
func skewProbe(t *testing.T, own *clock.Manual) (sample func(way time.Duration), ahead func() time.Duration) {
	t.Helper()
	opts := rulesConfig(burstRule(50, time.Second))
	opts.Clock = own
	l, _ := newTestLimiterWith(t, opts, keyspace.MustNew(servicetest.KeyPrefix(t)), NewMemoryStore(0))
	const offset = 3 * time.Second
	sample = func(way time.Duration) {
		sent := own.Now()
		l.learnSkew(sent.Add(way+offset), sent)
	}
	ahead = func() time.Duration { return l.storeNow().Sub(own.Now().Add(offset)) }
	return sample, ahead
}

// A call that queued on its way to the store (a busy store, a round held
// behind another) does not move the estimate of the store's clock ahead
// by its wait: the least sample of the last skewHold stands (the flight
// test's held round moved it 50 ms ahead, and the view's local refusals
// ended 50 ms early). A larger sample is taken once the kept one is
// skewHold old, so a store clock stepped forward is followed.
func TestSkew_AQueuedCallDoesNotMoveTheEstimateAhead(t *testing.T) {
	own := clock.NewManual(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	sample, ahead := skewProbe(t, own)
	sample(2 * time.Millisecond)
	if got := ahead(); got != 2*time.Millisecond {
		t.Fatalf("after a 2 ms request way the estimate is %v ahead, want 2ms", got)
	}
	own.Advance(time.Second)
	sample(50 * time.Millisecond) // queued
	if got := ahead(); got != 2*time.Millisecond {
		t.Errorf("a call queued 50 ms moved the estimate to %v ahead, want 2ms (the least sample)", got)
	}
	sample(time.Millisecond)
	if got := ahead(); got != time.Millisecond {
		t.Errorf("a 1 ms sample left the estimate %v ahead, want 1ms", got)
	}
	own.Advance(skewHold + time.Millisecond)
	sample(20 * time.Millisecond)
	if got := ahead(); got != 20*time.Millisecond {
		t.Errorf("a sample after the kept one is %v old left the estimate %v ahead, want 20ms", skewHold, got)
	}
}

// A sample equal to the kept one renews its hold (the estimate is
// confirmed, not aged), and a larger one is taken only once the kept one
// is more than skewHold old: at exactly skewHold it still stands.
func TestSkew_AnEqualSampleRenewsTheHold(t *testing.T) {
	own := clock.NewManual(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	sample, ahead := skewProbe(t, own)
	sample(5 * time.Millisecond)
	own.Advance(6 * time.Second)
	sample(5 * time.Millisecond) // renews the hold
	own.Advance(5 * time.Second) // 11 s after the first, 5 s after the renewal
	sample(30 * time.Millisecond)
	if got := ahead(); got != 5*time.Millisecond {
		t.Errorf("a larger sample 5 s after an equal one moved the estimate to %v ahead, want 5ms (the renewed hold)", got)
	}
	own.Advance(skewHold - 5*time.Second) // exactly skewHold after the renewal
	sample(40 * time.Millisecond)
	if got := ahead(); got != 5*time.Millisecond {
		t.Errorf("at exactly skewHold a larger sample moved the estimate to %v ahead, want 5ms", got)
	}
	own.Advance(time.Millisecond)
	sample(40 * time.Millisecond)
	if got := ahead(); got != 40*time.Millisecond {
		t.Errorf("past skewHold the estimate is %v ahead, want 40ms", got)
	}
}

// A sync call's sending moment is read on the Limiter's own clock, not on
// the view's (which runs on the store's clock as estimated): the estimate
// is the store's answer less that moment, so reading it on the estimated
// clock would count the offset twice. With the store 3 s ahead and
// learned, the syncer's own clock still reads the Limiter's.
func TestSync_ACallIsTimedOnTheLimitersOwnClock(t *testing.T) {
	own := clock.NewManual(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	opts := rulesConfig(burstRule(50, time.Second))
	opts.Clock = own
	opts.Sync = 50 * time.Millisecond
	l, _ := newTestLimiterWith(t, opts, keyspace.MustNew(servicetest.KeyPrefix(t)), NewMemoryStore(0))
	sent := own.Now()
	l.learnSkew(sent.Add(3*time.Second), sent)
	if got := l.sync.view.now().Sub(own.Now()); got != 3*time.Second {
		t.Fatalf("the view runs %v ahead of the Limiter's clock, want the learned 3s", got)
	}
	if got := l.sync.own(); !got.Equal(own.Now()) {
		t.Errorf("the syncer's own clock reads %v, want the Limiter's %v", got, own.Now())
	}
}
