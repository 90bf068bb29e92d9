package ratelimit

import (
	"testing"
	"time"
)

// remaining is what a rule lets pass on a state the store answered: a
// fixed window's limit less its count (negative past the limit), the
// limit for an absent key; leaseOf shares it among the replicas.
func TestRemainingAndLeaseOfAFixedWindow(t *testing.T) {
	t.Parallel()
	h := Hit{Algorithm: FixedWindow, Limit: 10, Period: time.Minute}
	for _, tc := range []struct {
		s              KeyState
		remaining, of3 int64
	}{
		{KeyState{}, 10, 3},
		{KeyState{N: 4, TTL: time.Second}, 6, 2},
		{KeyState{N: 10, TTL: time.Second}, 0, 0},
		{KeyState{N: 12, TTL: time.Second}, -2, 0},
		{KeyState{N: 4}, 10, 3}, // no TTL: the key is gone
	} {
		if got := remaining(h, tc.s, 0); got != tc.remaining {
			t.Errorf("remaining(limit 10, %+v) = %d, want %d", tc.s, got, tc.remaining)
		}
		if got := leaseOf(h, tc.s, 0, 3); got != tc.of3 {
			t.Errorf("leaseOf(limit 10, %+v, 3 replicas) = %d, want %d", tc.s, got, tc.of3)
		}
	}
}

// allowed reads a fixed window's pass from its count (the limit-th hit
// passes, the next does not) and the others' from their answer.
func TestAllowedReadsEachAlgorithmsAnswer(t *testing.T) {
	t.Parallel()
	fixed := Hit{Algorithm: FixedWindow, Limit: 5}
	for n, want := range map[int64]bool{1: true, 5: true, 6: false} {
		if got := allowed(fixed, Count{N: n}); got != want {
			t.Errorf("fixed window of 5, count %d: allowed %v, want %v", n, got, want)
		}
	}
	for _, alg := range []Algorithm{GCRA, SlidingWindow} {
		h := Hit{Algorithm: alg, Limit: 5}
		if !allowed(h, Count{N: 99, Allowed: true}) || allowed(h, Count{N: 1}) {
			t.Errorf("%v: allowed does not follow the answer's Allowed", alg)
		}
	}
}

// unreserve takes this replica's reservation back out of the store's
// answer: the reserved requests from the window they were sent in (the
// previous one when the window rolled meanwhile), the granted lease from
// the answer's current window, or both from a GCRA TAT.
func TestUnreserveTakesTheReservationFromItsWindow(t *testing.T) {
	t.Parallel()
	sliding := Hit{Algorithm: SlidingWindow, Limit: 10, Period: time.Second}
	for _, tc := range []struct {
		name      string
		got, sent KeyState
		reserved  int64
		cur, prev float64
	}{
		{"same window", KeyState{Index: 100, Cur: 6, Prev: 7, Leased: 2, TTL: time.Second}, KeyState{Index: 100}, 3, 1, 7},
		{"the window rolled", KeyState{Index: 100, Cur: 6, Prev: 7, Leased: 2, TTL: time.Second}, KeyState{Index: 99}, 3, 4, 4},
		{"never below zero", KeyState{Index: 100, Cur: 1, Prev: 1, Leased: 2, TTL: time.Second}, KeyState{Index: 99}, 3, 0, 0},
		{"a window long gone", KeyState{Index: 100, Cur: 6, Prev: 7, TTL: time.Second}, KeyState{Index: 97}, 3, 6, 7},
	} {
		u := unreserve(sliding, tc.got, tc.sent, tc.reserved)
		if u.Cur != tc.cur || u.Prev != tc.prev || u.Leased != 0 {
			t.Errorf("%s: cur %v prev %v leased %d, want %v, %v, 0", tc.name, u.Cur, u.Prev, u.Leased, tc.cur, tc.prev)
		}
	}
	gcra := Hit{Algorithm: GCRA, Limit: 10, Period: time.Second} // 100 ms per request
	if u := unreserve(gcra, KeyState{TAT: 10000, Leased: 2, TTL: time.Second}, KeyState{}, 1); u.TAT != 9700 || u.Leased != 0 {
		t.Errorf("GCRA: TAT %v leased %d, want 9700 (three requests of 100 ms back) and 0", u.TAT, u.Leased)
	}
	if u := unreserve(gcra, KeyState{TAT: 10000, Leased: 2}, KeyState{}, 1); u.TAT != 10000 {
		t.Errorf("an absent key: TAT %v, want it as answered", u.TAT)
	}
}
