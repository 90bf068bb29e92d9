package ratelimit

import (
	"testing"
	"time"
)

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

// reserve adds n requests to a GCRA or sliding-window state; n 0 returns
// the state as it was (an absent one stays absent). A sliding window
// adds to its current window, rolling an older state into it (its count
// becomes the previous one) and keeping a state of this window's counts.
func TestReserveAddsToTheStatesCurrentWindow(t *testing.T) {
	const nowMS = 5*60_000 + 30_000 // window 5 of a minute, half through
	sliding := Hit{Key: "s", Algorithm: SlidingWindow, Limit: 10, Period: time.Minute}
	gcra := Hit{Key: "g", Algorithm: GCRA, Limit: 10, Period: time.Minute}
	for _, h := range []Hit{sliding, gcra} {
		for _, s := range []KeyState{{}, {TTL: time.Minute, Index: 5, Cur: 3, TAT: nowMS + 6_000}} {
			if got := reserve(h, s, 0, nowMS); got != s {
				t.Errorf("%v: reserve(%+v, 0) = %+v, want the state unchanged", h.Algorithm, s, got)
			}
		}
	}
	for _, c := range []struct {
		name           string
		s              KeyState
		index, cur, pr float64
	}{
		{"absent", KeyState{}, 5, 2, 0},
		{"this window", KeyState{TTL: time.Minute, Index: 5, Cur: 3, Prev: 1}, 5, 5, 1},
		{"the window before", KeyState{TTL: time.Minute, Index: 4, Cur: 3, Prev: 1}, 5, 2, 3},
		{"two windows before", KeyState{TTL: time.Minute, Index: 3, Cur: 3, Prev: 1}, 5, 2, 0},
	} {
		got := reserve(sliding, c.s, 2, nowMS)
		if got.Index != c.index || got.Cur != c.cur || got.Prev != c.pr || !got.present() {
			t.Errorf("sliding, %s: reserve 2 = index %v cur %v prev %v (TTL %v), want index %v cur %v prev %v",
				c.name, got.Index, got.Cur, got.Prev, got.TTL, c.index, c.cur, c.pr)
		}
	}
	if got := reserve(gcra, KeyState{}, 2, nowMS); got.TAT != nowMS+12_000 {
		t.Errorf("gcra: reserve 2 on an absent state = TAT %v, want now + 2 emission intervals (%v)", got.TAT, nowMS+12_000)
	}
}
