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
			f := firstViews(t, mk, "192.0.2.2")
			syncer, first, stored, want := f.syncer, f.ops, f.got, f.want
			ctx := context.Background()
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

// syncStart is a store on which one replica's views of three keys (a
// fixed window, a GCRA and a sliding window, of ip) went first: the
// store's clock pinned at a whole second (nowMS, idx the sliding window's
// index), the ops sent, their answers (got) and what they must be (want).
type syncStart struct {
	syncer     Syncer
	nowMS, idx float64
	ops        []SyncOp
	got, want  []KeyState
}

// firstViews sends one replica's views of ip's three keys to a new store
// of mk and checks the answers (the store holds the views alone).
func firstViews(t *testing.T, mk storeUnderTest, ip string) syncStart {
	t.Helper()
	s, ks := mk(t)
	now := time.UnixMilli(1_764_584_450_000) // a whole second
	pinStoreClock(s, now)
	f := syncStart{syncer: s.(Syncer), nowMS: float64(now.UnixMilli()), idx: float64(now.UnixMilli() / 10_000)}
	f.ops = []SyncOp{
		{Hit: Hit{Key: ks.RateLimit("burst", ip), Algorithm: FixedWindow, TTL: 5 * time.Second}, Local: KeyState{N: 3, TTL: 4 * time.Second}},
		{Hit: Hit{Key: ks.RateLimit("g", ip), Algorithm: GCRA, Limit: 10, Period: 10 * time.Second}, Local: KeyState{TAT: f.nowMS + 3000, TTL: 3 * time.Second}},
		{Hit: Hit{Key: ks.RateLimit("s", ip), Algorithm: SlidingWindow, Limit: 10, Period: 10 * time.Second}, Local: KeyState{Index: f.idx, Cur: 3, Prev: 1, TTL: 15 * time.Second}},
	}
	f.got = make([]KeyState, len(f.ops))
	if _, err := f.syncer.Sync(context.Background(), f.ops, f.got); err != nil {
		t.Fatal(err)
	}
	f.want = []KeyState{
		{N: 3, TTL: 4 * time.Second},
		{TAT: f.nowMS + 3000, TTL: 3 * time.Second},
		{Index: f.idx, Cur: 3, Prev: 1, TTL: time.Duration((f.idx+2)*10_000-f.nowMS) * time.Millisecond},
	}
	checkStates(t, "one replica's views alone", f.got, f.want)
	return f
}
