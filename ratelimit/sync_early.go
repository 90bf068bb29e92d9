package ratelimit

import (
	"context"
	"sync"
)

// Early exchange of a hot new key (docs/rate-limiting.md "Quota
// leasing"): a replica gives itself floor(limit / N) of a key it has not
// exchanged yet (a fresh share) without asking, and the store holds that
// share from the replica's first exchange of the key. Left to the rounds,
// that exchange comes up to one sync interval after the key's first hit,
// and a flood spends the share within it: another replica's ask could
// lease from a store that does not hold the share yet, and the key's
// first window passed up to limit + (N − 1) × floor(limit / N). A key
// whose fresh share is half spent before any exchange is therefore
// exchanged at once, in the background: the share is in the store about
// one round trip after the hit that crossed the threshold, long before
// the replica has spent the rest (each replica's ask comes only then).
// The hit itself is decided on the view and does not wait.
//
// Cost: one store command per such key and fresh share (a key's first
// window on each replica, and each later window a fixed window's key
// starts afresh in; the keys of one request that cross together share
// it), only for keys hit at least twice, and at least half their share,
// before the replica's next round: a key hit once (an IP scan) never
// costs one.

// earlyDue reports whether k's fresh share is spent enough (half of it,
// at least 2 hits) that its first exchange should not wait for the next
// round, and the share is not spent whole (the next hit asks then). The
// caller holds s.mu.
func earlyDue(k *syncKey) bool {
	return k.fresh && !k.early && k.spent >= max(2, (k.lease+1)/2) && k.spent < k.lease
}

// exchangeEarly exchanges keys (the keys of one request that crossed
// their half share: one store call) as a round would (each one's view and
// what is left of its fresh share, which the store then holds; no new
// lease), under the round timeout (off the request path), serialized with the replica's other
// exchanges. A failure leaves the keys dirty for the next round, which
// the Limiter logs if the store stays down.
func (s *syncer) exchangeEarly(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.roundTimeout)
	defer cancel()
	s.earlies.Add(float64(len(keys)))
	_, _, calls, _ := s.exchange(ctx, keys, false)
	s.commands.Add(float64(calls))
}

// earlyRuns tracks the early exchanges on the wire, so Stop can wait for
// them (a sync.WaitGroup's Add may not race its Wait: Decide may run
// during Stop).
type earlyRuns struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n == 0; nil: none started yet
}

// goRun runs f on a goroutine, tracked.
func (r *earlyRuns) goRun(f func()) {
	r.mu.Lock()
	if r.n == 0 {
		r.idle = make(chan struct{})
	}
	r.n++
	r.mu.Unlock()
	go func() {
		defer func() {
			r.mu.Lock()
			if r.n--; r.n == 0 {
				close(r.idle)
			}
			r.mu.Unlock()
		}()
		f()
	}()
}

// wait waits until no early exchange is on the wire, at most until ctx
// ends (then it returns ctx's error).
func (r *earlyRuns) wait(ctx context.Context) error {
	r.mu.Lock()
	idle := r.idle
	r.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
