package ratelimit

import (
	"context"
	"sync"
	"time"
)

// syncInFlight bounds the chunks of one exchange on the wire at once:
// they overlap the client's encoding and decoding, and the network, with
// the store's execution (docs/rate-limiting.md, "Synchronization").
const syncInFlight = 4

// The key space of a synchronizing Limiter (issue 27 item 5): the rounds
// send only the keys counted since the last one (the dirty list, not a
// scan of every key remembered), in chunks streamed under a per-chunk
// deadline, and the keys remembered are bounded by the view's LRU
// (SyncKeys), which forgets a key's synchronization state together with
// its counts.

// markDirty marks k (named key) for the next round, listing it once per
// round. The caller holds s.mu.
func (s *syncer) markDirty(key string, k *syncKey) {
	if !k.dirty {
		k.dirty = true
		s.dirty = append(s.dirty, key)
	}
}

// syncSweep is how many remembered keys a round examines for a state
// that expired (a window ago) while the key was not hit (forgotten then, as a round
// forgot every such key before): a sample, not a scan of them all.
const syncSweep = 1024

// sweep forgets up to syncSweep keys that are clean and whose state read
// back has expired, starting at a random place of the map (Go's map
// iteration), so every key is examined in turn over the rounds. The
// caller holds s.mu.
func (s *syncer) sweep(now time.Time) {
	n := 0
	nowM := momentOf(now)
	for key, k := range s.keys.all {
		if n++; n > syncSweep {
			return
		}
		// A window after its state expired: the key's lease state (a
		// lease reserved, a refusal until the window's end) is over too.
		if !k.dirty && !nowM.before(k.baseUntil.add(max(k.hit.ttl, k.hit.period))) {
			s.keys.remove(key)
		}
	}
}

// forget drops key's synchronization state when the view forgets the key
// (evicted as the least recently used past SyncKeys, or its state became
// empty). A dirty key's counts since the last round are lost with it:
// counted as dropped. Called by the view with its shard locked: nothing
// holds s.mu while calling into the view.
func (s *syncer) forget(key string) {
	s.mu.Lock()
	k, ok := s.keys.get(key)
	dirty := ok && k.dirty
	if ok {
		s.keys.remove(key)
	}
	s.mu.Unlock()
	if dirty {
		s.dropped.Inc()
	}
}

// collect returns the ops of an exchange: every dirty key's (only nil: a
// round, which takes the dirty list) or the keys of only, dirty or not
// (an ask). Each is marked clean, with the base it was last read at while
// that is still live. Listed keys forgotten or already sent since are
// skipped, and so are keys with a parked call (a round keeps them dirty).
func (s *syncer) collect(only []string) []SyncOp {
	now := s.view.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := only
	if only == nil {
		s.sweep(now) // before: the keys this round sends are still dirty
		keys, s.dirty = s.dirty, nil
	}
	ops := make([]SyncOp, 0, len(keys))
	nowM := momentOf(now)
	for _, key := range keys {
		k, ok := s.keys.get(key)
		if !ok || (only == nil && !k.dirty) {
			continue
		}
		if s.parkedKeys[key] > 0 {
			// A call of the key is parked (its answer was lost): its view
			// goes once that call has been sent again (sync_replay.go);
			// a round keeps it dirty for the next.
			if only == nil {
				s.dirty = append(s.dirty, key)
			}
			continue
		}
		k.dirty = false
		op := SyncOp{Hit: s.keys.hit(key, k.hit)}
		if nowM.before(k.baseUntil) {
			op.Base = k.base
		}
		ops = append(ops, op)
	}
	return ops
}

// stream sends ops in chunks of syncChunk, at most syncInFlight at once,
// the first one registering the replica; ask says the exchange is an ask.
// It returns the merged states by key (an ask's; nil for a round), the
// latest store clock, the store calls, and the first error (the chunks
// that succeeded are merged all the same).
func (s *syncer) stream(ctx context.Context, ops []SyncOp, ask bool) (map[string]KeyState, time.Time, int, error) {
	var merged map[string]KeyState
	if ask {
		merged = make(map[string]KeyState, len(ops))
	}
	var (
		mu       sync.Mutex // the results below, and merged
		at       time.Time
		calls    int
		firstErr error
		wg       sync.WaitGroup
	)
	slots := make(chan struct{}, syncInFlight)
	for i, c := range chunks(len(ops), syncChunk) {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			t, n, err := s.exchangeChunk(ctx, ops[c[0]:c[1]], i == 0, ask, merged, &mu)
			mu.Lock()
			defer mu.Unlock()
			calls += n
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if t.After(at) {
				at = t
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return merged, time.Time{}, calls, firstErr
	}
	return merged, at, calls, nil
}
