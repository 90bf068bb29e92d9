package ratelimit

import "testing"

// leaseShare is floor(rem / replicas), at least 0; a limit below the
// replicas leaves each 1 while anything remains. At the replicas' count
// (a share of 1 each) the floor applies: 1 left of 2 over two replicas
// is a share of 0.
func TestLeaseShareIsTheFloorOfWhatRemains(t *testing.T) {
	for _, c := range []struct{ limit, rem, replicas, want int64 }{
		{10, 10, 2, 5},
		{10, 9, 2, 4},
		{10, -3, 2, 0},
		{1, 1, 2, 1},
		{1, 0, 2, 0},
		{2, 2, 2, 1},
		{2, 1, 2, 0},
		{3, 2, 2, 1},
		{9, 9, 0, 9},
	} {
		if got := leaseShare(c.limit, c.rem, c.replicas); got != c.want {
			t.Errorf("leaseShare(limit %d, %d left, %d replicas) = %d, want %d", c.limit, c.rem, c.replicas, got, c.want)
		}
	}
}

// slidingAt reads a sliding window's count at window idx from a state
// read at s.Index: its current window, the one before (its previous
// count), or 0 for any other window and for an absent state.
func TestSlidingAtReadsTheWindowAskedFor(t *testing.T) {
	s := KeyState{TTL: 1, Index: 5, Cur: 3, Prev: 2}
	for _, c := range []struct {
		idx  float64
		want float64
	}{{5, 3}, {4, 2}, {3, 0}, {6, 0}} {
		if got := slidingAt(s, c.idx); got != c.want {
			t.Errorf("slidingAt(state at window 5, window %v) = %v, want %v", c.idx, got, c.want)
		}
	}
	if got := slidingAt(KeyState{Index: 5, Cur: 3, Prev: 2}, 5); got != 0 {
		t.Errorf("slidingAt(an absent state) = %v, want 0", got)
	}
}
