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
	// TAT is a GCRA theoretical arrival time, unix milliseconds.
	TAT float64
	// Over is, in a merged GCRA state, that the merge passed now + period
	// and was cut back to it: the replicas together spent more than the
	// bucket held.
	Over bool
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
	base, local := op.Base, op.Local
	if !local.present() {
		return cur, false
	}
	nowMS := float64(now.UnixMilli())
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
		over := tat > nowMS+period
		tat = min(tat, nowMS+period)
		if tat <= nowMS {
			return KeyState{}, true
		}
		return KeyState{TAT: tat, Over: over, TTL: time.Duration(max(1, math.Ceil(tat-nowMS))) * time.Millisecond}, true
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
	default:
		window := max(op.Hit.TTL.Truncate(time.Millisecond), time.Millisecond)
		other := int64(0)
		ttl := local.TTL
		if cur.present() {
			other = max(0, cur.N-max(base.N, 0))
			if !base.present() {
				other = cur.N
			}
			ttl = cur.TTL
		}
		return KeyState{N: local.N + other, TTL: min(ttl, window)}, true
	}
}
