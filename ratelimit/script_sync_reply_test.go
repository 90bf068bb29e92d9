package ratelimit

import (
	"testing"
	"time"
)

// decodeSync reads the sync script's reply: five values per key (state,
// state, state or the ended flag, TTL in ms, leased) then the script's now
// and the replicas. Each row is one key's five values and the state it
// must decode to, compared whole: a key past its TTL is absent (a fixed
// window's flag says its window ended), and only a fixed window carries
// Ended.
func TestDecodeSyncReadsEachAlgorithmsState(t *testing.T) {
	fixed := Hit{Key: "f", Algorithm: FixedWindow, TTL: time.Minute, Limit: 10}
	sliding := Hit{Key: "s", Algorithm: SlidingWindow, Period: time.Minute, Limit: 10}
	gcra := Hit{Key: "g", Algorithm: GCRA, Period: time.Minute, Limit: 10}
	for _, c := range []struct {
		name  string
		hit   Hit
		reply []any
		want  KeyState
	}{
		{"fixed window", fixed, []any{int64(7), "1796660253053", int64(0), int64(1500), int64(2)}, KeyState{N: 7, End: 1796660253053, Leased: 2, TTL: 1500 * time.Millisecond}},
		{"fixed window counted in a window that ended", fixed, []any{int64(7), "1796660253053", int64(1), int64(1500), int64(0)}, KeyState{N: 7, End: 1796660253053, TTL: 1500 * time.Millisecond, Ended: true}},
		{"fixed window gone, its window ended", fixed, []any{int64(7), int64(0), int64(1), int64(0), int64(0)}, KeyState{Ended: true}},
		{"fixed window gone", fixed, []any{int64(7), int64(0), int64(0), int64(0), int64(0)}, KeyState{}},
		{"fixed window with a negative TTL", fixed, []any{int64(7), int64(0), int64(0), int64(-1), int64(0)}, KeyState{}},
		{"sliding window", sliding, []any{int64(29944337), "3.5", int64(9), int64(60000), int64(1)}, KeyState{Index: 29944337, Cur: 3.5, Prev: 9, Leased: 1, TTL: time.Minute}},
		{"sliding window gone (its third value is a count, not a flag)", sliding, []any{int64(29944337), int64(3), int64(9), int64(0), int64(0)}, KeyState{}},
		{"gcra", gcra, []any{"1796660253053.5", int64(1), int64(0), int64(2500), int64(3)}, KeyState{TAT: 1796660253053.5, Leased: 3, TTL: 2500 * time.Millisecond}},
		{"gcra not over", gcra, []any{"1796660253053.5", int64(0), int64(0), int64(2500), int64(0)}, KeyState{TAT: 1796660253053.5, TTL: 2500 * time.Millisecond}},
		{"gcra gone", gcra, []any{int64(1), int64(1), int64(1), int64(0), int64(0)}, KeyState{}},
		{"a resolved call that never ran", fixed, []any{int64(0), int64(0), int64(0), int64(0), int64(-1)}, KeyState{Leased: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := make([]KeyState, 1)
			reply := append(append([]any{}, c.reply...), int64(1796660250000), int64(3))
			now, replicas, err := decodeSync([]SyncOp{{Hit: c.hit}}, reply, out)
			if err != nil {
				t.Fatal(err)
			}
			if out[0] != c.want {
				t.Errorf("decoded %+v, want %+v", out[0], c.want)
			}
			if now.UnixMilli() != 1796660250000 || replicas != 3 {
				t.Errorf("now %d, replicas %d; want 1796660250000 and 3", now.UnixMilli(), replicas)
			}
		})
	}
}

// slotTag is what Redis Cluster hashes of a key (CLUSTER KEYSLOT's rule:
// the text between the first '{' and the first '}' after it, unless that
// text is empty), and whether a marker name can carry it in braces.
func TestSlotTagFollowsRedisClusterHashTags(t *testing.T) {
	for _, c := range []struct {
		key, tag string
		ok       bool
	}{
		{"olp:rl:burst:{203.0.113.5}", "203.0.113.5", true},
		{"a{x}b{y}", "x", true},
		{"{x}b", "x", true}, // a tag at the key's first byte
		{"a}{b}", "b", true},
		{"a{}b", "a{}b", false},   // an empty tag: the whole key is hashed, and it holds a '}'
		{"a{}b}", "a{}b}", false}, // the first '}' after the '{' closes an empty tag
		{"a{b", "a{b", true},      // no '}': the whole key, which braces can carry
		{"plain", "plain", true},
		{"a}b", "a}b", false},
	} {
		tag, ok := slotTag(c.key)
		if tag != c.tag || ok != c.ok {
			t.Errorf("slotTag(%q) = %q, %v; want %q, %v", c.key, tag, ok, c.tag, c.ok)
		}
	}
}
