package ratelimit

import "testing"

// tightest picks the key a Redis Cluster counts first, alone (the one
// concurrent requests race for): the enforced hit with the least room
// in a peek's answers — a fixed window's limit less its count, the
// others' Remaining — the first of a tie; observed hits and fixed
// windows of limit 0 (which never refuse) are never it, and a request
// of none but those counts its first hit first.
func TestTightestIsTheEnforcedKeyWithTheLeastRoom(t *testing.T) {
	t.Parallel()
	fixed := func(limit int64) Hit { return Hit{Algorithm: FixedWindow, Limit: limit} }
	gcra := Hit{Algorithm: GCRA, Limit: 10}
	observed := Hit{Algorithm: GCRA, Limit: 10, Observe: true}
	for _, tc := range []struct {
		name string
		hits []Hit
		out  []Count
		want int
	}{
		{"a fixed window's room is its limit less its count", []Hit{gcra, fixed(10)}, []Count{{Remaining: 3}, {N: 8}}, 1},
		{"the count, not the limit", []Hit{fixed(5), fixed(10)}, []Count{{N: 1}, {N: 8}}, 1},
		{"a refilling rule's Remaining", []Hit{fixed(10), gcra}, []Count{{N: 2}, {Remaining: 1}}, 1},
		{"the first of a tie", []Hit{fixed(10), gcra, fixed(10)}, []Count{{N: 7}, {Remaining: 3}, {N: 7}}, 0},
		{"an observed rule never", []Hit{fixed(10), observed}, []Count{{N: 2}, {Remaining: 0}}, 0},
		{"a fixed window of limit 0 never", []Hit{gcra, fixed(0)}, []Count{{Remaining: 4}, {N: 100}}, 0},
		{"a fixed window of limit 1 is one", []Hit{gcra, fixed(1)}, []Count{{Remaining: 4}, {N: 1}}, 1},
		{"none enforced: the first", []Hit{observed, fixed(0)}, []Count{{Remaining: 0}, {N: 9}}, 0},
		{"past its limit", []Hit{gcra, fixed(3)}, []Count{{Remaining: 0}, {N: 5}}, 1},
	} {
		if got := tightest(tc.hits, tc.out); got != tc.want {
			t.Errorf("%s: tightest = %d, want %d", tc.name, got, tc.want)
		}
	}
}
