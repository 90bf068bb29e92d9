package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// A round that reaches the store leaves the rounds not failing, whether
// it sent keys, only registered the replica, or had nothing to send
// (nothing dirty, nothing parked, its registration not due): a failed ask
// then holds the replica to its lease instead of taking the store for
// down (holdToLease reads roundsFailing).
func TestSync_ARoundThatReachesTheStoreLeavesTheRoundsNotFailing(t *testing.T) {
	ls := twoReplicasOfTen(t)
	a := ls[0]
	ctx := context.Background()
	check := func(what string) {
		t.Helper()
		if a.sync.roundsFailing.Load() {
			t.Errorf("after %s the rounds are failing", what)
		}
	}
	a.Decide(ctx, Subject{Route: "portal", IP: "203.0.113.144"})
	if _, _, err := a.sync.round(ctx); err != nil {
		t.Fatal(err)
	}
	check("a round that sent a key")
	if _, _, err := a.sync.round(ctx); err != nil {
		t.Fatal(err)
	}
	check("a round with nothing to send")
	a.sync.lastReg.Store(0)
	if _, calls, err := a.sync.round(ctx); err != nil || calls != 1 {
		t.Fatalf("the idle registration: %d calls, %v; want 1 call", calls, err)
	}
	check("an idle registration")
}

// A round of more keys than one call carries (syncChunk, 256) goes in
// several calls, only the first of which registers the replica: the
// others' answers carry no count of replicas, and must not be read as one
// (a replica that took them for "none registered" would decide alone, on
// the whole limit, until its next registration).
func TestSync_ARoundInSeveralCallsKeepsTheReplicaCount(t *testing.T) {
	ls := twoReplicasOfTen(t)
	a := ls[0]
	ctx := context.Background()
	for i := range 3*syncChunk + 1 {
		a.Decide(ctx, Subject{Route: "portal", IP: fmt.Sprintf("2001:db8:%x::1", i)})
	}
	_, calls, err := a.sync.round(ctx)
	if err != nil || calls < 4 {
		t.Fatalf("the round: %d calls, %v; want 4 calls at least", calls, err)
	}
	if got := a.sync.replicas.Load(); got != 2 {
		t.Errorf("after a round of 4 calls the replica counts %d replicas, want 2", got)
	}
}

// A round's sweep examines syncSweep keys, no more and no fewer: of
// syncSweep + 10 clean keys whose state expired, it forgets syncSweep,
// and the next round the rest.
func TestSync_ASweepForgetsAtMostSyncSweepKeys(t *testing.T) {
	s := twoReplicasOfTen(t)[0].sync
	now := s.view.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.keys.len()
	for i := range syncSweep + 10 {
		s.keys.add(fmt.Sprintf("k%d", i))
	}
	s.sweep(now)
	if got := s.keys.len() - before; got != 10 {
		t.Errorf("after a sweep of %d expired keys %d are left, want 10", syncSweep+10, got)
	}
	s.sweep(now)
	if got := s.keys.len() - before; got != 0 {
		t.Errorf("after a second sweep %d expired keys are left, want 0", got)
	}
}

// A key with a parked call is not sent by a round, and stays dirty for
// the next one (its counts go once the parked call is resolved); an ask
// of it sends nothing either and leaves the dirty list as it was.
func TestSync_ARoundKeepsAParkedKeyDirty(t *testing.T) {
	s := twoReplicasOfTen(t)[0].sync
	s.mu.Lock()
	k := s.keys.add("k")
	s.markDirty("k", k)
	s.mu.Unlock()
	s.fail(&chunkCall{ops: []SyncOp{{Hit: Hit{Key: "k"}}}, marker: "m"})
	if ops := s.collect(nil); len(ops) != 0 {
		t.Errorf("a round sent %d ops of a parked key, want 0", len(ops))
	}
	s.mu.Lock()
	dirty := slices.Clone(s.dirty)
	s.mu.Unlock()
	if !slices.Equal(dirty, []string{"k"}) {
		t.Errorf("after a round the dirty keys are %q, want the parked key", dirty)
	}
	if ops := s.collect([]string{"k"}); len(ops) != 0 {
		t.Errorf("an ask sent %d ops of a parked key, want 0", len(ops))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(s.dirty, []string{"k"}) {
		t.Errorf("after an ask the dirty keys are %q, want the parked key once", s.dirty)
	}
}

// twoReplicasOfTen is a manual fleet of two replicas sharing an embedded
// store, one rule of 10 a minute, sync 50 ms.
func twoReplicasOfTen(t *testing.T) []*Limiter {
	opts := rulesConfig(burstRule(10, time.Minute))
	opts.Sync = 50 * time.Millisecond
	return manualFleet(t, 2, opts, keyspace.MustNew(servicetest.KeyPrefix(t)), newRegisteringMemory())
}
