package ratelimit

import (
	"testing"
)

// A call's marker outlives the last moment it may be resolved: replayFor
// after the call was sent, its last try taking up to a round timeout.
// Shorter, a call resolved late would find no marker and merge a second
// time.
func TestSync_AMarkerOutlivesTheCallsLastTry(t *testing.T) {
	s := twoReplicasOfTen(t)[0].sync
	if got, least := s.markerTTL(), s.replayFor()+s.roundTimeout; got <= least {
		t.Errorf("markerTTL %v, want more than replayFor + a round timeout (%v)", got, least)
	}
}

// A key is parked while any of its calls is: with two calls of it parked
// and one resolved it is still parked (its view must not go with a round
// meanwhile), and with both resolved the key leaves the table of parked
// keys (which would otherwise grow with every key ever parked).
func TestSync_AKeyStaysParkedUntilItsLastCallIs(t *testing.T) {
	s := twoReplicasOfTen(t)[0].sync
	call := func() *chunkCall {
		return &chunkCall{ops: []SyncOp{{Hit: Hit{Key: "k"}}}, marker: "m"}
	}
	first, second := call(), call()
	s.fail(first)
	s.fail(second)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parkedKeys["k"] != 2 {
		t.Fatalf("two failed calls of a key park it %d times, want 2", s.parkedKeys["k"])
	}
	s.unpark(first)
	if s.parkedKeys["k"] != 1 {
		t.Errorf("a key with one of its two calls resolved is parked %d times, want 1", s.parkedKeys["k"])
	}
	s.unpark(second)
	if n, ok := s.parkedKeys["k"]; ok {
		t.Errorf("a key with no call parked is still in the parked table (%d)", n)
	}
}
