package ratelimit

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisClient is the part of go-redis the store uses; *redis.Client,
// *redis.ClusterClient and *redis.Ring all satisfy it.
type redisClient interface {
	redis.Scripter
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	Ping(ctx context.Context) *redis.StatusCmd
	Pipeline() redis.Pipeliner
}

var (
	hitScript   = redis.NewScript(hitScriptSource)
	relaxScript = redis.NewScript(relaxScriptSource)
)

// RedisStore is the Store on go-redis (redis://, rediss://, Upstash over
// RESP, Redis Cluster, Ring). One Hit is one EVALSHA (plus one EVAL the first
// time a server has not cached the script). On a Redis Cluster (or Ring), where one
// request's keys fall in different slots, each key is its own EVALSHA and
// they travel in one pipeline (one round trip per node), in two passes
// for a request of several rules (hitPerKey).
type RedisStore struct {
	c       redisClient
	cluster bool
	// pinnedMS, when not 0, replaces the script's TIME (unix ms): set only
	// by this package's tests, which need a deterministic store clock.
	pinnedMS atomic.Int64
}

// NewRedisStore returns a store on c, as built by redisconn.New (which sets
// the timeouts the fail-open deadline relies on).
func NewRedisStore(c redis.UniversalClient) *RedisStore {
	cluster := false
	switch c.(type) {
	case *redis.ClusterClient, *redis.Ring: // one request's keys may live on different nodes
		cluster = true
	}
	return &RedisStore{c: c, cluster: cluster}
}

// Hit implements Store.
func (s *RedisStore) Hit(ctx context.Context, hits []Hit, out []Count) (time.Time, error) {
	if len(hits) == 0 {
		return time.Time{}, nil
	}
	pinned := s.pinnedMS.Load()
	if s.cluster && len(hits) > 1 {
		return s.hitPerKey(ctx, pinned, hits, out)
	}
	mode := modeDecide
	if s.cluster {
		mode = modeCounted // a cluster counts a refusal nowhere (hitPerKey)
	}
	keys, args := hitArgs(pinned, mode, hits)
	reply, err := hitScript.Run(ctx, s.c, keys, args...).Int64Slice()
	if err != nil {
		return time.Time{}, fmt.Errorf("running the rate-limit script: %w", err)
	}
	return decodeHits(hits, reply, out)
}

// hitPerKey decides a request's hits on a Redis Cluster, where its keys
// live in different slots and no script sees them all. A first pipeline
// peeks every key (the script decides, writes nothing). When that says
// the request is refused, nothing is counted: on a cluster a refused
// request counts into no key, full windows included, since a window
// that looks full may hold a count about to be taken back, and a
// refusal counted there would keep it full for good (fresh attack pass
// 24 RL-01; Store.Hit's full-window counting is the distribution's,
// which a cluster forgoes for refused requests). Otherwise the request
// is counted key by key (mode "c": a key that refuses counts nothing):
// first the enforced key with the least room left (the one concurrent
// requests race for: a flooding address's own GCRA), alone, then, if it
// passed, the others in one pipeline; when a
// key another request filled since the peek refuses in either step, a
// last pipeline takes back what was counted into the others
// (uncount.go). Three round trips for a request of several rules, four
// in that race (docs/rate-limiting.md, "Decided together"; fresh attack
// passes 23 RL-01 and 24 RL-01: counting every key at once, a flood's
// concurrent requests all counted into the route-wide windows before
// their GCRA refused them, and the counts, taken back a moment later,
// refused the clients that read them). A failed take-back leaves the
// counts, as a lost answer to INCR would. Each node caches scripts on
// its own, so a pipeline can meet NOSCRIPT on one node after the script
// already ran (and counted) on another: only the keys that got NOSCRIPT
// are sent again, as EVAL, so no hit is counted twice. Each node answers
// with its own clock; the latest is returned.
func (s *RedisStore) hitPerKey(ctx context.Context, pinned int64, hits []Hit, out []Count) (time.Time, error) {
	all := make([]int, len(hits))
	for i := range all {
		all[i] = i
	}
	ats := make([]time.Time, len(hits))
	now, err := s.hitEach(ctx, pinned, modePeek, hits, all, out, ats)
	if err != nil {
		return time.Time{}, err
	}
	if requestRefused(hits, out) {
		return now, nil
	}
	first := tightest(hits, out)
	steps := [][]int{{first}, slices.DeleteFunc(all, func(i int) bool { return i == first })}
	for n, step := range steps {
		t, err := s.hitEach(ctx, pinned, modeCounted, hits, step, out, ats)
		if err != nil {
			return time.Time{}, err
		}
		now = later(now, t)
		if !requestRefused(hits, out) {
			continue
		}
		var back []Hit
		var backAt []time.Time
		for _, step := range steps[:n+1] {
			for _, i := range step {
				if out[i].Counted && allowed(hits[i], out[i]) {
					back, backAt = append(back, hits[i]), append(backAt, ats[i])
					out[i].Counted = false
				}
			}
		}
		_ = s.uncount(ctx, back, backAt) // a failure leaves the counts
		break
	}
	return now, nil
}

// tightest returns the index of the enforced hit with the least room
// left in out (a peek's answers), or 0 when every hit is observed.
func tightest(hits []Hit, out []Count) int {
	best, room := 0, int64(math.MaxInt64)
	for i, h := range hits {
		if h.Observe || h.Algorithm == FixedWindow && h.Limit <= 0 {
			continue // never refuses
		}
		r := out[i].Remaining
		if h.Algorithm == FixedWindow {
			r = h.Limit - out[i].N
		}
		if r < room {
			best, room = i, r
		}
	}
	return best
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// hitEach runs the hit script in mode once per key of hits[idx], in one
// pipeline, into out[idx] and ats[idx] (each node's clock), and returns
// the latest clock the nodes said.
func (s *RedisStore) hitEach(ctx context.Context, pinned int64, mode string, hits []Hit, idx []int, out []Count, ats []time.Time) (time.Time, error) {
	cmds := s.evalEach(ctx, hitScript, hitScriptSource, len(idx), func(n int) ([]string, []any) {
		return hitArgs(pinned, mode, hits[idx[n]:idx[n]+1])
	})
	var now time.Time
	for n, c := range cmds {
		reply, err := c.Int64Slice()
		if err != nil {
			return time.Time{}, fmt.Errorf("running the rate-limit script per key: %w", err)
		}
		i := idx[n]
		t, err := decodeHits(hits[i:i+1], reply, out[i:i+1])
		if err != nil {
			return time.Time{}, err
		}
		ats[i] = t
		if t.After(now) {
			now = t
		}
	}
	return now, nil
}

// ReadRelax implements Store (one EVALSHA; one per key on a cluster).
func (s *RedisStore) ReadRelax(ctx context.Context, keys []string) ([]RelaxValue, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if !s.cluster {
		return s.readRelax(ctx, keys)
	}
	out := make([]RelaxValue, len(keys))
	for i := range keys {
		v, err := s.readRelax(ctx, keys[i:i+1])
		if err != nil {
			return nil, err
		}
		out[i] = v[0]
	}
	return out, nil
}

func (s *RedisStore) readRelax(ctx context.Context, keys []string) ([]RelaxValue, error) {
	reply, err := relaxScript.Run(ctx, s.c, keys).Slice()
	if err != nil {
		return nil, fmt.Errorf("reading relax keys: %w", err)
	}
	return decodeRelax(len(keys), reply)
}

// WriteRelax implements Store (SET key factor PX ttl).
func (s *RedisStore) WriteRelax(ctx context.Context, key string, factor float64, ttl time.Duration) error {
	if err := s.c.Set(ctx, key, formatFactor(factor), ttl).Err(); err != nil {
		return fmt.Errorf("writing relax key: %w", err)
	}
	return nil
}

// Ping implements Store.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("pinging redis: %w", err)
	}
	return nil
}

var _ Store = (*RedisStore)(nil)

// evalEach runs script once per call i (args(i) gives its keys and
// arguments) in one pipeline, then sends the calls that met NOSCRIPT again
// as EVAL of source in a second pipeline. A call that met NOSCRIPT did not
// run, and every other call ran once, so nothing is counted twice, even on
// a Redis Cluster whose nodes each cache scripts on their own. The
// commands are returned for the caller to read (replies or errors).
func (s *RedisStore) evalEach(ctx context.Context, script *redis.Script, source string, n int, args func(i int) ([]string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	p := s.c.Pipeline()
	for i := range n {
		keys, argv := args(i)
		cmds[i] = p.EvalSha(ctx, script.Hash(), keys, argv...)
	}
	_, _ = p.Exec(ctx) // errors are read per command
	var missing []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		p := s.c.Pipeline()
		for _, i := range missing {
			keys, argv := args(i)
			cmds[i] = p.Eval(ctx, source, keys, argv...)
		}
		_, _ = p.Exec(ctx)
	}
	return cmds
}
