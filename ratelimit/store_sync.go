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

// Sync implements Syncer: the sync script over at most syncChunk keys per
// call, every call in one pipeline (one round trip; on a Redis Cluster
// each key is its own call, one round trip per node). Calls that met
// NOSCRIPT did not run and are sent again as EVAL; the others counted.
func (s *RedisStore) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	if len(ops) == 0 {
		return time.Time{}, nil
	}
	pinned := s.pinnedMS.Load()
	size := syncChunk
	if s.cluster {
		size = 1
	}
	parts := chunks(len(ops), size)
	cmds := s.evalEach(ctx, syncScript, syncScriptSource, len(parts), func(i int) ([]string, []any) {
		return syncArgs(pinned, ops[parts[i][0]:parts[i][1]])
	})
	var now time.Time
	for i, c := range cmds {
		reply, err := c.Slice()
		if err != nil {
			return time.Time{}, fmt.Errorf("running the rate-limit sync script: %w", err)
		}
		t, err := decodeSync(ops[parts[i][0]:parts[i][1]], reply, out[parts[i][0]:parts[i][1]])
		if err != nil {
			return time.Time{}, err
		}
		if t.After(now) {
			now = t
		}
	}
	return now, nil
}

// Sync implements Syncer: one POST per syncChunk keys.
func (s *RESTStore) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	var now time.Time
	for _, c := range chunks(len(ops), syncChunk) {
		keys, args := syncArgs(s.pinnedMS.Load(), ops[c[0]:c[1]])
		arr, err := s.evalSHA(ctx, syncScriptSource, syncScriptSHA, keys, args)
		if err != nil {
			return time.Time{}, fmt.Errorf("running the rate-limit sync script: %w", err)
		}
		t, err := decodeSync(ops[c[0]:c[1]], arr, out[c[0]:c[1]])
		if err != nil {
			return time.Time{}, err
		}
		if t.After(now) {
			now = t
		}
	}
	return now, nil
}

var (
	_ Syncer = (*RedisStore)(nil)
	_ Syncer = (*RESTStore)(nil)
)
