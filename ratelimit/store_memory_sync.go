package ratelimit

import (
	"context"
	"time"
)

// state returns key's state as h's algorithm reads it. The caller holds
// sh.mu.
func (sh *memoryShard) state(h Hit, now time.Time) KeyState {
	e, ok := sh.keys.Get(h.Key)
	if !ok || !momentOf(now).before(e.expires) {
		return KeyState{}
	}
	ttl := e.expires.sub(momentOf(now)).Truncate(time.Millisecond)
	if ttl <= 0 {
		return KeyState{}
	}
	switch h.Algorithm {
	case GCRA:
		if e.tat == 0 {
			return KeyState{}
		}
		return KeyState{TAT: e.tat, TTL: ttl}
	case SlidingWindow:
		if e.sliding.window != float64(h.Period.Milliseconds()) {
			return KeyState{}
		}
		return KeyState{Index: e.sliding.index, Cur: e.sliding.cur, Prev: e.sliding.prev, TTL: ttl}
	default:
		if e.n == 0 {
			return KeyState{}
		}
		return KeyState{N: e.n, End: e.end, TTL: ttl}
	}
}

// set writes s as key's state (absent: the key is removed). The caller
// holds sh.mu.
func (sh *memoryShard) set(h Hit, s KeyState, now time.Time) {
	if !s.present() {
		sh.keys.Remove(h.Key)
		return
	}
	e := &memoryEntry{expires: momentOf(now).add(s.TTL)}
	switch h.Algorithm {
	case GCRA:
		e.tat = s.TAT
	case SlidingWindow:
		e.sliding = slidingState{window: float64(h.Period.Milliseconds()), index: s.Index, cur: s.Cur, prev: s.Prev}
	default:
		e.n, e.end = s.N, s.End
	}
	sh.keys.Add(h.Key, e)
}

// Sync implements Syncer on the store's clock, with the merge of the
// sync script.
func (s *MemoryStore) Sync(_ context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	now := s.now()
	for i, op := range ops {
		sh := s.shard(op.Hit.Key)
		sh.mu.Lock()
		cur := sh.state(op.Hit, now)
		merged, write := mergeState(cur, op, now)
		if write {
			sh.set(op.Hit, merged, now)
		}
		out[i] = merged
		sh.mu.Unlock()
	}
	return now, nil
}

// adoptFixed makes a synchronizing replica's view of the fixed window
// h.Key the store's window got, as the store answered an exchange that
// sent snap (the view then): the view ends when the store's window ends
// (now + got.TTL on the view's clock, never before the store's key, since
// the TTL was read before the answer arrived) and counts got.N, less the
// part of it that is this replica's lease not yet spent (reserved: the
// view counts its passes as they come), plus what it counted since snap, so every replica resets at the store's instant
// and counts into the store's window. A view that restarted since snap
// (its window ended meanwhile) brings all its count. When the store holds
// no window (it dropped the counts of a window that was over there, or
// nothing was sent), the view keeps only what it counted since snap, in a
// window of its own from now (End 0: the next exchange joins or starts
// the store's window), or ends now when that is nothing.
func (s *MemoryStore) adoptFixed(h Hit, snap, got KeyState, reserved int64) {
	now := s.now()
	sh := s.shard(h.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// The view's entry, live as state reads it (a TTL of a whole
	// millisecond): an entry the snapshot read as over is not counted
	// again. An entry of a window adopted from the store (end set) that
	// the snapshot did not see is that window's last instant: none of its
	// count is since the snapshot.
	var cur *memoryEntry
	e, ok := sh.keys.Get(h.Key)
	if ok && e.expires.sub(momentOf(now)).Truncate(time.Millisecond) > 0 && e.n > 0 && (snap.present() || e.end == 0) {
		cur = e
	}
	since := int64(0)
	if cur != nil {
		since = cur.n
		if snap.present() && cur.end == snap.End && cur.n >= snap.N {
			since = cur.n - snap.N
		}
	}
	switch {
	case got.present():
		sh.keys.Add(h.Key, &memoryEntry{n: max(0, got.N-reserved) + since, end: got.End, expires: momentOf(now).add(got.TTL)})
	case since == 0:
		if ok {
			e.n, e.end, e.expires = 0, 0, momentOf(now) // the next hit starts a window
		}
	case cur.end != 0:
		window := max(h.TTL.Truncate(time.Millisecond), time.Millisecond)
		sh.keys.Add(h.Key, &memoryEntry{n: since, expires: momentOf(now).add(window)})
	default:
		cur.n = since
	}
}

// snapshot returns the state of each hit's key, on the store's clock.
func (s *MemoryStore) snapshot(hits []Hit, out []KeyState) time.Time {
	now := s.now()
	for i, h := range hits {
		sh := s.shard(h.Key)
		sh.mu.Lock()
		out[i] = sh.state(h, now)
		sh.mu.Unlock()
	}
	return now
}

var _ Syncer = (*MemoryStore)(nil)
