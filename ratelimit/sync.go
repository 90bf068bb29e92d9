package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxSyncKeys bounds the keys a synchronizing Limiter tracks between two
// rounds (each about 200 bytes): a key past it is still decided locally,
// its counts are not sent (counted in
// borda_ratelimit_sync_dropped_total) and the next round starts at once.
const maxSyncKeys = DenyCacheSize

// syncer decides on a local view of the store and sends the view's
// pending counts every interval in one round trip (Options.Sync,
// docs/rate-limiting.md "Synchronization"). The view is a MemoryStore: its
// arithmetic is the scripts' (the conformance suite proves it), so a
// replica alone decides exactly as the per-request round trip would.
type syncer struct {
	view     *MemoryStore
	store    Syncer
	interval time.Duration
	timeout  time.Duration
	wake     chan struct{} // a full key map asks for a round now
	perKey   bool          // a Redis Cluster: one script call per key

	mu   sync.Mutex
	keys map[string]*syncKey

	rounds  [2]prometheus.Counter // ok, error
	dropped prometheus.Counter
}

// syncKey is one key's synchronization: the last hit's parameters, the
// store's state as last read (base, valid until baseUntil), and whether
// the view counted since the last round.
type syncKey struct {
	hit       Hit
	base      KeyState
	baseUntil time.Time
	dirty     bool
}

func newSyncer(store Syncer, interval, timeout time.Duration, now func() time.Time, m *metrics) *syncer {
	view := NewMemoryStore(0)
	view.SetClock(now)
	return &syncer{
		view:     view,
		store:    store,
		interval: interval,
		timeout:  timeout,
		wake:     make(chan struct{}, 1),
		keys:     map[string]*syncKey{},
		rounds:   [2]prometheus.Counter{m.syncRounds.WithLabelValues("ok"), m.syncRounds.WithLabelValues("error")},
		dropped:  m.syncDropped,
	}
}

// hit decides hits on the view and marks their keys for the next round.
// It never waits on the store.
func (s *syncer) hit(hits []Hit, out []Count) time.Time {
	at, _ := s.view.Hit(context.Background(), hits, out) // the embedded store does not fail
	full := false
	s.mu.Lock()
	for _, h := range hits {
		k, ok := s.keys[h.Key]
		if !ok {
			if len(s.keys) >= maxSyncKeys {
				full = true
				continue
			}
			k = &syncKey{}
			s.keys[h.Key] = k
		}
		k.hit, k.dirty = h, true
	}
	s.mu.Unlock()
	if full {
		s.dropped.Inc()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return at
}

// round sends every dirty key's view in one round trip, merges the
// store's answer into the view (keeping what the view counted meanwhile)
// and forgets keys whose state has expired. On failure the keys stay
// dirty (their counts go with the next round) and decisions stay local.
// It returns the store's clock (zero on failure) and the store calls
// sent.
func (s *syncer) round(ctx context.Context) (time.Time, int, error) {
	now := s.view.now()
	var ops []SyncOp
	s.mu.Lock()
	for key, k := range s.keys {
		if !k.dirty {
			if !now.Before(k.baseUntil) {
				delete(s.keys, key)
			}
			continue
		}
		k.dirty = false
		op := SyncOp{Hit: k.hit}
		if now.Before(k.baseUntil) {
			op.Base = k.base
		}
		ops = append(ops, op)
	}
	s.mu.Unlock()
	if len(ops) == 0 {
		return time.Time{}, 0, nil
	}
	calls := (len(ops) + syncChunk - 1) / syncChunk
	if s.perKey {
		calls = len(ops)
	}
	hits := make([]Hit, len(ops))
	for i := range ops {
		hits[i] = ops[i].Hit
	}
	local := make([]KeyState, len(ops))
	s.view.snapshot(hits, local)
	for i := range ops {
		ops[i].Local = local[i]
	}
	got := make([]KeyState, len(ops))
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	at, err := s.store.Sync(ctx, ops, got)
	cancel()
	if err != nil {
		s.rounds[1].Inc()
		s.mu.Lock()
		for _, op := range ops {
			if k, ok := s.keys[op.Hit.Key]; ok {
				k.dirty = true
			}
		}
		s.mu.Unlock()
		return time.Time{}, calls, err
	}
	s.rounds[0].Inc()
	// The view becomes the store's state plus what it counted since the
	// snapshot: the same merge, with the snapshot as the base.
	back := make([]SyncOp, len(ops))
	for i, op := range ops {
		back[i] = SyncOp{Hit: op.Hit, Base: op.Local, Local: got[i]}
	}
	_, _ = s.view.Sync(ctx, back, make([]KeyState, len(ops)))
	now = s.view.now()
	s.mu.Lock()
	for i, op := range ops {
		if k, ok := s.keys[op.Hit.Key]; ok {
			k.base, k.baseUntil = got[i], now.Add(got[i].TTL)
		}
	}
	s.mu.Unlock()
	return at, calls, nil
}
