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

// A GCRA key whose TAT lies past now + period (the replicas' merged
// passes overshot the bucket) is read capped at now + period, as the
// script caps it: the next hit is refused for one emission interval, and
// the bucket is full again one period later.
func TestMemoryStore_GCRAOvershotTATIsCappedAtOnePeriod(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(0)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	h := Hit{Key: "g", Algorithm: GCRA, Limit: 10, Period: time.Second} // 100 ms per request
	sh := s.shard(h.Key)
	sh.mu.Lock()
	e, _ := sh.entry(h.Key, now, time.Minute)
	e.tat = float64(now.UnixMilli()) + 5000
	sh.mu.Unlock()
	out := make([]Count, 1)
	if err := hitAt(context.Background(), s, now, []Hit{h}, out); err != nil {
		t.Fatal(err)
	}
	if c := out[0]; c.Allowed || c.RetryAfter != 100*time.Millisecond || c.ResetAfter != time.Second {
		t.Errorf("a TAT 5 s ahead: %+v; want refused, RetryAfter 100ms, ResetAfter 1s", c)
	}
}

// ReadRelax of a key that holds no relax factor (a counter) reads as no
// relax, the zero RelaxValue, as the Redis store's reply does.
func TestMemoryStore_ReadRelaxOfACounterIsNoRelax(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(0)
	out := make([]Count, 1)
	if err := storeHit(context.Background(), s, []Hit{{Key: "c", Algorithm: FixedWindow, Limit: 5, TTL: time.Minute}}, out); err != nil {
		t.Fatal(err)
	}
	vals, err := s.ReadRelax(context.Background(), []string{"c"})
	if err != nil || vals[0] != (RelaxValue{}) {
		t.Errorf("ReadRelax of a counter: %+v (%v), want the zero RelaxValue", vals, err)
	}
}
