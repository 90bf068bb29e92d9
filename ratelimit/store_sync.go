package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// syncChunk bounds the keys of one sync script call, so one call never
// holds Redis for long; a sync of more keys sends several calls in one
// pipeline (still one round trip).
const syncChunk = 256

var syncScript = redis.NewScript(syncScriptSource)

// chunks splits n ops into calls of at most size ops: [from, to) pairs.
func chunks(n, size int) [][2]int {
	var out [][2]int
	for from := 0; from < n; from += size {
		out = append(out, [2]int{from, min(from+size, n)})
	}
	return out
}

// Sync implements Syncer without registering: SyncRegister with the zero
// Registration.
func (s *RedisStore) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	now, _, err := s.SyncRegister(ctx, ops, out, Registration{})
	return now, err
}

// SyncRegister implements RegisteringSyncer: the sync script over at most
// syncChunk keys per call, every call in one pipeline (one round trip; on
// a Redis Cluster each key is its own call, one round trip per node),
// reg registered by the first call (on a Cluster by a call of its own in
// the same pipeline: the registry is in another slot), each call marked
// reg.Exchange and its index when that is set (exchangeMarker). Calls that
// met NOSCRIPT did not run and are sent again as EVAL; the others counted.
func (s *RedisStore) SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (time.Time, int64, error) {
	if len(ops) == 0 && reg.ID == "" {
		return time.Time{}, 0, nil
	}
	pinned := s.pinnedMS.Load()
	size := syncChunk
	if s.cluster {
		size = 1
	}
	parts := chunks(len(ops), size)
	if s.cluster || len(parts) == 0 {
		parts = append(parts, [2]int{len(ops), len(ops)}) // registration alone
	}
	regAt := 0
	if s.cluster {
		regAt = len(parts) - 1
	}
	cmds := s.evalEach(ctx, syncScript, syncScriptSource, len(parts), func(i int) ([]string, []any) {
		r := Registration{ExchangeTTL: reg.ExchangeTTL, Resolve: reg.Resolve, NotAfter: reg.NotAfter}
		if i == regAt {
			r.ID, r.Key, r.TTL = reg.ID, reg.Key, reg.TTL
		}
		part := ops[parts[i][0]:parts[i][1]]
		marker := ""
		if len(part) > 0 {
			marker = exchangeMarker(reg, i, s.cluster, part[0].Hit.Key)
		}
		return syncArgs(pinned, part, r, marker)
	})
	var now time.Time
	var replicas int64
	for i, c := range cmds {
		reply, err := c.Slice()
		if err != nil {
			return time.Time{}, 0, fmt.Errorf("running the rate-limit sync script: %w", err)
		}
		t, n, err := decodeSync(ops[parts[i][0]:parts[i][1]], reply, out[parts[i][0]:parts[i][1]])
		if err != nil {
			return time.Time{}, 0, err
		}
		if t.After(now) {
			now = t
		}
		replicas = max(replicas, n)
	}
	return now, replicas, nil
}

// Sync implements Syncer without registering.
func (s *RESTStore) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	now, _, err := s.SyncRegister(ctx, ops, out, Registration{})
	return now, err
}

// SyncRegister implements RegisteringSyncer: one POST per syncChunk keys,
// the first one registering reg, each marked reg.Exchange and its index
// when that is set.
func (s *RESTStore) SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (time.Time, int64, error) {
	var now time.Time
	var replicas int64
	parts := chunks(len(ops), syncChunk)
	if len(parts) == 0 && reg.ID != "" {
		parts = [][2]int{{0, 0}}
	}
	for i, c := range parts {
		r := Registration{ExchangeTTL: reg.ExchangeTTL, Resolve: reg.Resolve, NotAfter: reg.NotAfter}
		if i == 0 {
			r.ID, r.Key, r.TTL = reg.ID, reg.Key, reg.TTL
		}
		marker := ""
		if c[1] > c[0] {
			marker = exchangeMarker(reg, i, false, "")
		}
		keys, args := syncArgs(s.pinnedMS.Load(), ops[c[0]:c[1]], r, marker)
		arr, err := s.evalSHA(ctx, syncScriptSource, syncScriptSHA, keys, args)
		if err != nil {
			return time.Time{}, 0, fmt.Errorf("running the rate-limit sync script: %w", err)
		}
		t, n, err := decodeSync(ops[c[0]:c[1]], arr, out[c[0]:c[1]])
		if err != nil {
			return time.Time{}, 0, err
		}
		if t.After(now) {
			now = t
		}
		replicas = max(replicas, n)
	}
	return now, replicas, nil
}

// RegisteringSyncer is a Syncer that also registers the calling replica in
// the same round trip and returns how many replicas are registered
// (docs/rate-limiting.md "Quota leasing"). RedisStore and RESTStore
// implement it; the MemoryStore is one process (one replica).
type RegisteringSyncer interface {
	Syncer
	SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (now time.Time, replicas int64, err error)
}

var (
	_ Syncer = (*RedisStore)(nil)
	_ Syncer = (*RESTStore)(nil)

	_ RegisteringSyncer = (*RedisStore)(nil)
	_ RegisteringSyncer = (*RESTStore)(nil)
)
