package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"
)

func TestMemoryStore_MemoryIsBounded(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(64)
	out := make([]Count, 1)
	for i := range 10_000 {
		_ = storeHit(context.Background(), s, []Hit{{Key: "k" + strconv.Itoa(i), Algorithm: FixedWindow, TTL: time.Hour}}, out)
	}
	if n := s.Len(); n > 64 {
		t.Fatalf("store holds %d keys, bound 64", n)
	}
}

// A fixed-window key lives [its first hit, + its window): a hit one
// nanosecond before the end counts in it, a hit at the end starts the
// next window. (The Redis store's keys expire on Redis's own clock, not
// on a pinned one; this pins the MemoryStore's half.)
func TestMemoryStore_AWindowEndsAtItsTTL(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(0)
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	h := []Hit{{Key: "k", Algorithm: FixedWindow, Limit: 10, TTL: time.Second}}
	out := make([]Count, 1)
	for _, step := range []struct {
		at   time.Time
		n    int64
		what string
	}{
		{t0, 1, "the first hit"},
		{t0.Add(time.Second - time.Nanosecond), 2, "a nanosecond before the end"},
		{t0.Add(time.Second), 1, "at the end"},
	} {
		if err := hitAt(context.Background(), s, step.at, h, out); err != nil {
			t.Fatal(err)
		}
		if out[0].N != step.n {
			t.Errorf("%s: count %d, want %d", step.what, out[0].N, step.n)
		}
	}
}
