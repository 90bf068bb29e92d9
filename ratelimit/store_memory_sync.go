package ratelimit

import (
	"context"
	"time"
)

// state returns key's state as h's algorithm reads it. The caller holds
// sh.mu.
func (sh *memoryShard) state(h Hit, now time.Time) KeyState {
	e, ok := sh.keys.Get(h.Key)
	if !ok || !now.Before(e.expires) {
		return KeyState{}
	}
	ttl := e.expires.Sub(now).Truncate(time.Millisecond)
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
		return KeyState{N: e.n, TTL: ttl}
	}
}

// set writes s as key's state (absent: the key is removed). The caller
// holds sh.mu.
func (sh *memoryShard) set(h Hit, s KeyState, now time.Time) {
	if !s.present() {
		sh.keys.Remove(h.Key)
		return
	}
	e := &memoryEntry{expires: now.Add(s.TTL)}
	switch h.Algorithm {
	case GCRA:
		e.tat = s.TAT
	case SlidingWindow:
		e.sliding = slidingState{window: float64(h.Period.Milliseconds()), index: s.Index, cur: s.Cur, prev: s.Prev}
	default:
		e.n = s.N
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
