package ratelimit

import (
	"context"
	"testing"
	"time"
)

// A view's fixed-window entry in its last fraction of a millisecond is
// over, as the snapshot reads it (a TTL of whole milliseconds): adopting
// the store's new window counts none of its hits again. Taken for live,
// its 3 hits of the ended window were added to the store's 7 of the new
// one.
func TestMemoryStore_AdoptingANewWindowDropsAnEntryInItsLastMillisecond(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(0)
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	h := Hit{Key: "k", Algorithm: FixedWindow, Limit: 10, TTL: time.Second}
	out := make([]Count, 1)
	for range 3 {
		if err := hitAt(context.Background(), s, t0, []Hit{h}, out); err != nil {
			t.Fatal(err)
		}
	}
	last := t0.Add(time.Second - 500*time.Microsecond)
	pinStoreClock(s, last)
	snap := make([]KeyState, 1)
	s.snapshot([]Hit{h}, snap)
	if snap[0].present() {
		t.Fatalf("the snapshot half a millisecond before the end reads %+v, want the window over", snap[0])
	}
	endMS := float64(last.Add(time.Second).UnixMilli())
	s.adoptFixed(h, snap[0], KeyState{N: 7, End: endMS, TTL: time.Second}, 0)
	s.snapshot([]Hit{h}, snap)
	if snap[0].N != 7 {
		t.Errorf("after adopting the store's new window of 7 the view counts %d, want 7", snap[0].N)
	}
}
