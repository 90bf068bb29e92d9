package ratelimit

import (
	"testing"
	"time"
)

// ownShare is a replica's own share of a limit as a GCRA step: floor(limit
// / replicas) requests per window; a limit below the replicas has none
// (the store decides those hits), a share of exactly one has one.
func TestOwnShareIsTheFloorOfTheLimitAmongTheReplicas(t *testing.T) {
	for _, c := range []struct {
		limit, replicas int64
		step            time.Duration
		ok              bool
	}{
		{10, 2, 600 * time.Millisecond, true}, // 5 per 3 s
		{2, 2, 3 * time.Second, true},         // one each
		{3, 2, 3 * time.Second, true},         // floor(3 / 2) = 1
		{1, 2, 0, false},                      // below the replicas
		{9, 3, time.Second, true},
		{10, 0, 300 * time.Millisecond, true}, // no replica counted: the whole limit
	} {
		step, ok := ownShare(Hit{Algorithm: GCRA, Limit: c.limit, Period: 3 * time.Second}, c.replicas)
		if step != c.step || ok != c.ok {
			t.Errorf("ownShare(limit %d, %d replicas) = %v, %v; want %v, %v", c.limit, c.replicas, step, ok, c.step, c.ok)
		}
	}
}

// ownShareRoom lets a replica pass on its own share a burst of ownBurst
// (2): room while its own TAT is at most one step ahead, none past it.
func TestOwnShareRoomHoldsABurstOfTwo(t *testing.T) {
	h := Hit{Algorithm: GCRA, Limit: 10, Period: 3 * time.Second} // 2 replicas: a step of 600 ms
	now := momentOf(time.Unix(1_764_584_450, 0))
	step := 600 * time.Millisecond
	for _, c := range []struct {
		ahead time.Duration
		room  bool
	}{
		{-time.Second, true},
		{0, true},
		{step, true}, // one pass ahead: the burst's second
		{step + time.Nanosecond, false},
		{2 * step, false},
	} {
		k := &syncKey{ownTAT: now.add(c.ahead)}
		if got := ownShareRoom(h, k, now, 2); got != c.room {
			t.Errorf("own TAT %v ahead: room %v, want %v", c.ahead, got, c.room)
		}
	}
	if ownShareRoom(Hit{Algorithm: GCRA, Limit: 1, Period: 3 * time.Second}, &syncKey{}, now, 2) {
		t.Error("a limit below the replicas has no own share, yet there was room")
	}
}

// A replica alone paces no own share: its passes are the whole limit's,
// and a second replica joining must not find them counted against the
// share it then has (a failed ask holds a client to that share,
// ownShareRoom). With two replicas each pass moves the share's arrival
// time.
func TestSync_AReplicaAlonePacesNoOwnShare(t *testing.T) {
	s := twoReplicasOfTen(t)[0].sync
	h := Hit{Key: "k", Algorithm: FixedWindow, Limit: 10, TTL: time.Minute}
	ownTAT := func() moment {
		s.mu.Lock()
		defer s.mu.Unlock()
		k, _ := s.keys.get("k")
		return k.ownTAT
	}
	s.count([]Hit{h}, []Count{{N: 1, Counted: true}}, 1, 0)
	if got := ownTAT(); got != 0 {
		t.Errorf("a pass made alone moved the own share's arrival time to %v, want it unset", got)
	}
	s.count([]Hit{h}, []Count{{N: 2, Counted: true}}, 2, 0)
	if ownTAT() == 0 {
		t.Error("a pass made among two replicas left the own share's arrival time unset")
	}
}
