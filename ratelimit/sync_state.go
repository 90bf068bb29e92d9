package ratelimit

import (
	"context"
	"math"
	"time"
)

// KeyState is one key's counting state, as the synchronization round trip
// (Options.Sync, docs/rate-limiting.md "Synchronization") writes and reads
// it. TTL 0 means the key is absent.
type KeyState struct {
	// N is a FixedWindow count.
	N int64
	// End is a FixedWindow's end on the store's clock, unix milliseconds:
	// the window's identity, so that replicas count into the same window
	// and reset at the same instant (docs/rate-limiting.md, "Quota
	// leasing"). In a replica's view it is the end of the store's window
	// the view adopted at its last read; 0 there is a window the replica
	// started and the store has not answered for yet.
	End float64
	// Leased is, in a merged state answering an ask (SyncOp.LeaseAmong),
	// the lease the store granted and reserved in the state (a fixed
	// window's N, a sliding window's current count, GCRA's TAT): the
	// replica's reservation (lease.go).
	Leased int64
	// TAT is a GCRA theoretical arrival time, unix milliseconds.
	TAT float64
	// Ended is, in the answer to a fixed-window call sent again
	// (Registration.Resolve, or a marked call that had run), that the
	// window the first call counted in and reserved its lease in is over:
	// the state answered (the current window, or none) holds neither.
	Ended bool
	// Index, Cur and Prev are a SlidingWindow: the current window's
	// number (unix ms / window), its count and the previous window's.
	Index, Cur, Prev float64
	// TTL is the key's remaining lifetime (0: absent).
	TTL time.Duration
}

// SyncOp is one key's pending counts: Local is the replica's view of the
// key, Base the store's state it last read (zero: none); the store adds to
// its own state what the replica counted since Base, per counter
// (Local + max(0, store − Base)), so one replica alone writes exactly its
// Local and replicas add up.
type SyncOp struct {
	Hit   Hit
	Base  KeyState
	Local KeyState
	// LeaseAmong asks the store for a lease among that many replicas (0:
	// none): after the merge it reserves floor(remaining / LeaseAmong)
	// requests (1 while anything remains when the limit is below
	// LeaseAmong; remaining as lease.go's remaining reads the merged
	// state) and answers them in KeyState.Leased, so the replicas' leases
	// are in the state the others read. A fixed window adds them to N, a
	// sliding window to the count of the store's current window
	// (floor(now / window), rolled to it), GCRA to the TAT (lease ×
	// period / limit past max(TAT, now)).
	LeaseAmong int64
}

// Syncer is a Store that takes the pending counts of many keys in one
// round trip and returns the merged states (Options.Sync). RedisStore,
// RESTStore and MemoryStore implement it.
type Syncer interface {
	// Sync merges every op into the store (TTLs included) and writes the
	// merged state of each key into out (len(out) == len(ops)); it
	// returns the store's clock.
	Sync(ctx context.Context, ops []SyncOp, out []KeyState) (now time.Time, err error)
}

// present reports whether s holds a key.
func (s KeyState) present() bool { return s.TTL > 0 }

// slidingAt returns the count of window idx in a sliding state (0 when s
// is absent or holds neither that window nor the next).
func slidingAt(s KeyState, idx float64) float64 {
	switch {
	case !s.present():
		return 0
	case idx == s.Index:
		return s.Cur
	case idx == s.Index-1:
		return s.Prev
	}
	return 0
}

// mergeState is the merge of the sync script (script_sync.go) in Go:
// cur is the key's state in this store, op.Base what the writer last saw
// of it, op.Local the writer's own view; now is the store's clock. It
// returns the state to write (absent: leave the key as cur says).
func mergeState(cur KeyState, op SyncOp, now time.Time) (KeyState, bool) {
	nowMS := float64(now.UnixMilli())
	if a := op.Hit.Algorithm; a != GCRA && a != SlidingWindow {
		return mergeFixed(cur, op, nowMS)
	}
	merged, write := mergeCounts(cur, op, nowMS)
	if op.LeaseAmong <= 0 {
		return merged, write
	}
	if !write {
		merged = cur
	}
	lease := leaseShare(op.Hit.Limit, remaining(op.Hit, merged, nowMS), op.LeaseAmong)
	if lease == 0 {
		return merged, write
	}
	merged = reserve(op.Hit, merged, lease, nowMS)
	merged.Leased = lease
	return merged, true
}

// leaseShare is a replica's share among replicas of rem requests left:
// floor(rem / replicas), at least 0; 1 while anything remains when the
// limit is below replicas.
func leaseShare(limit, rem, replicas int64) int64 {
	rem = max(0, rem)
	if limit < replicas {
		return min(rem, 1)
	}
	return rem / max(replicas, 1)
}

// reserve adds n requests to s, a GCRA or sliding-window state, at nowMS
// (unix ms): GCRA's TAT moves n emission intervals past max(TAT, now); a
// sliding window is rolled to the current window (floor(now / window),
// unless s is already past it) and n is added to that window's count.
// The TTL follows. n 0 returns s.
func reserve(h Hit, s KeyState, n int64, nowMS float64) KeyState {
	if n <= 0 {
		return s
	}
	period := float64(h.Period.Milliseconds())
	if h.Algorithm == GCRA {
		tat := nowMS
		if s.present() {
			tat = max(s.TAT, nowMS)
		}
		tat += float64(n) * period / float64(max(h.Limit, 1))
		return KeyState{TAT: tat, TTL: time.Duration(max(1, math.Ceil(tat-nowMS))) * time.Millisecond}
	}
	idx := math.Floor(nowMS / period)
	switch {
	case !s.present():
		s = KeyState{Index: idx}
	case s.Index < idx:
		s = KeyState{Index: idx, Prev: slidingAt(s, idx-1)}
	}
	s.Cur += float64(n)
	s.TTL = time.Duration((s.Index+2)*period-nowMS) * time.Millisecond
	return s
}

// mergeCounts is mergeState's GCRA and sliding-window merge, without the
// lease.
func mergeCounts(cur KeyState, op SyncOp, nowMS float64) (KeyState, bool) {
	base, local := op.Base, op.Local
	if !local.present() {
		return cur, false
	}
	switch op.Hit.Algorithm {
	case GCRA:
		period := float64(op.Hit.Period.Milliseconds())
		other := 0.0
		if cur.present() && cur.TAT > nowMS {
			b := nowMS
			if base.present() {
				b = max(base.TAT, nowMS)
			}
			other = max(0, cur.TAT-b)
		}
		tat := max(local.TAT, nowMS) + other
		tat = min(tat, nowMS+period+gcraSlack(period, float64(op.Hit.Limit))) // a full bucket
		if tat <= nowMS {
			return KeyState{}, true
		}
		return KeyState{TAT: tat, TTL: time.Duration(max(1, math.Ceil(tat-nowMS))) * time.Millisecond}, true
	case SlidingWindow:
		w := float64(op.Hit.Period.Milliseconds())
		r := local.Index
		if cur.present() {
			r = max(r, cur.Index)
		}
		c := slidingAt(local, r) + max(0, slidingAt(cur, r)-slidingAt(base, r))
		p := slidingAt(local, r-1) + max(0, slidingAt(cur, r-1)-slidingAt(base, r-1))
		ttl := (r+2)*w - nowMS
		if ttl < 1 || (c == 0 && p == 0) {
			return KeyState{}, true
		}
		return KeyState{Index: r, Cur: c, Prev: p, TTL: time.Duration(ttl) * time.Millisecond}, true
	}
	return cur, false // not reached: fixed windows are mergeFixed's
}

// mergeFixed is the sync script's fixed-window branch: cur is the store's
// state (its window ends at now + cur.TTL), op.Local the replica's view.
// A view counting in a window it read from the store (Local.End set)
// adds to that window while the store still holds it, with what the store
// gained since op.Base (when Base is of that window); when that window is
// over in the store its counts are dropped, never carried into another
// window. A view that started its own window (Local.End 0) joins the
// store's window, or starts it with its own TTL. Windows are told apart by
// their ends: two windows of one key end at least a window apart, so ends
// within half a window are the same window. An ask (op.LeaseAmong) then
// reserves the replica's lease in the count (SyncOp.LeaseAmong).
func mergeFixed(cur KeyState, op SyncOp, nowMS float64) (KeyState, bool) {
	merged, write := mergeFixedCounts(cur, op, nowMS)
	if op.LeaseAmong <= 0 {
		return merged, write
	}
	lease := leaseShare(op.Hit.Limit, op.Hit.Limit-merged.N, op.LeaseAmong)
	if lease == 0 {
		return merged, write
	}
	if !merged.present() { // the window starts with the lease
		merged.TTL = max(op.Hit.TTL.Truncate(time.Millisecond), time.Millisecond)
		merged.End = nowMS + float64(merged.TTL.Milliseconds())
	}
	merged.N += lease
	merged.Leased = lease
	return merged, true
}

// mergeFixedCounts is mergeFixed without the lease.
func mergeFixedCounts(cur KeyState, op SyncOp, nowMS float64) (KeyState, bool) {
	base, local := op.Base, op.Local
	window := max(op.Hit.TTL.Truncate(time.Millisecond), time.Millisecond)
	tol := float64(window.Milliseconds()) / 2
	stored := cur
	if stored.present() {
		stored.TTL = min(stored.TTL, window)
		stored.End = nowMS + float64(stored.TTL.Milliseconds())
	}
	switch {
	case !local.present() || local.N <= 0:
		return stored, false
	case local.End > 0:
		if !stored.present() || math.Abs(stored.End-local.End) > tol {
			return stored, false // that window is over here
		}
		other := stored.N
		if base.present() && math.Abs(base.End-local.End) <= tol {
			other = max(0, stored.N-base.N)
		}
		return KeyState{N: local.N + other, End: stored.End, TTL: stored.TTL}, true
	case stored.present():
		return KeyState{N: local.N + stored.N, End: stored.End, TTL: stored.TTL}, true
	}
	ttl := local.TTL
	if ttl <= 0 || ttl > window {
		ttl = window
	}
	return KeyState{N: local.N, End: nowMS + float64(ttl.Milliseconds()), TTL: ttl}, true
}
