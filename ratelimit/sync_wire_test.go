package ratelimit

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A key the replica's view no longer holds (its local state absent) but
// whose base it still has goes to the store to be read, not merged: on
// every store the stored state stays as it was, and the answer is that
// state. Merging "nothing since the base" as a view would take the
// base's counts away from the key (the store would hold the other
// replicas' counts only, or nothing).
func TestSyncConformance_AGoneViewReadsTheStoredStateUnchanged(t *testing.T) {
	for name, mk := range conformanceStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, ks := mk(t)
			syncer := s.(Syncer)
			now := time.UnixMilli(1_764_584_450_000) // a whole second
			pinStoreClock(s, now)
			ctx := context.Background()
			fixed := Hit{Key: ks.RateLimit("burst", "192.0.2.2"), Algorithm: FixedWindow, TTL: 5 * time.Second}
			gcra := Hit{Key: ks.RateLimit("g", "192.0.2.2"), Algorithm: GCRA, Limit: 10, Period: 10 * time.Second}
			sliding := Hit{Key: ks.RateLimit("s", "192.0.2.2"), Algorithm: SlidingWindow, Limit: 10, Period: 10 * time.Second}
			nowMS := float64(now.UnixMilli())
			idx := float64(now.UnixMilli() / 10_000)
			first := []SyncOp{
				{Hit: fixed, Local: KeyState{N: 3, TTL: 4 * time.Second}},
				{Hit: gcra, Local: KeyState{TAT: nowMS + 3000, TTL: 3 * time.Second}},
				{Hit: sliding, Local: KeyState{Index: idx, Cur: 3, Prev: 1, TTL: 15 * time.Second}},
			}
			stored := make([]KeyState, 3)
			if _, err := syncer.Sync(ctx, first, stored); err != nil {
				t.Fatal(err)
			}
			want := []KeyState{
				{N: 3, TTL: 4 * time.Second},
				{TAT: nowMS + 3000, TTL: 3 * time.Second},
				{Index: idx, Cur: 3, Prev: 1, TTL: time.Duration((idx+2)*10_000-nowMS) * time.Millisecond},
			}
			checkStates(t, "the first view", stored, want)
			gone := make([]SyncOp, len(first))
			for i, op := range first {
				gone[i] = SyncOp{Hit: op.Hit, Base: stored[i]}
			}
			got := make([]KeyState, 3)
			if _, err := syncer.Sync(ctx, gone, got); err != nil {
				t.Fatal(err)
			}
			checkStates(t, "a gone view with its base", got, want)
			read := make([]SyncOp, len(first))
			for i, op := range first {
				read[i] = SyncOp{Hit: op.Hit}
			}
			if _, err := syncer.Sync(ctx, read, got); err != nil {
				t.Fatal(err)
			}
			checkStates(t, "read back", got, want)
		})
	}
}

// A GCRA TAT is fractional (an interval is period / limit: 3 333.333 ms
// for 3 per 10 s) and goes to the store's script as text: every store
// keeps it to the thousandth of a millisecond, so the replicas' views and
// the store agree on when the next request fits.
func TestSyncConformance_AFractionalTATKeepsItsThousandths(t *testing.T) {
	for name, mk := range conformanceStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, ks := mk(t)
			syncer := s.(Syncer)
			now := time.UnixMilli(1_764_584_450_000)
			pinStoreClock(s, now)
			nowMS := float64(now.UnixMilli())
			gcra := Hit{Key: ks.RateLimit("g", "192.0.2.3"), Algorithm: GCRA, Limit: 3, Period: 10 * time.Second}
			got := make([]KeyState, 1)
			op := []SyncOp{{Hit: gcra, Local: KeyState{TAT: nowMS + 3333.375, TTL: 3334 * time.Millisecond}}}
			if _, err := syncer.Sync(context.Background(), op, got); err != nil {
				t.Fatal(err)
			}
			if got[0].TAT != nowMS+3333.375 {
				t.Errorf("stored TAT now + %.4f ms, want now + 3333.375", got[0].TAT-nowMS)
			}
		})
	}
}

// chunks splits a round's keys into calls of at most size keys, with no
// empty call (each call is a store command: an empty one would cost a
// command, billed on Upstash, for nothing).
func TestChunksSplitsWithoutAnEmptyCall(t *testing.T) {
	for _, c := range []struct {
		n, size int
		want    [][2]int
	}{
		{0, 64, nil},
		{1, 64, [][2]int{{0, 1}}},
		{64, 64, [][2]int{{0, 64}}},
		{65, 64, [][2]int{{0, 64}, {64, 65}}},
		{3, 1, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
	} {
		if got := chunks(c.n, c.size); !slices.Equal(got, c.want) {
			t.Errorf("chunks(%d, %d) = %v, want %v", c.n, c.size, got, c.want)
		}
	}
}
