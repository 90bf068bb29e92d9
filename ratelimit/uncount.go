package ratelimit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// Uncounting takes back hits a store counted for a request that another
// part of its decision refused afterwards: the second pass of a Redis
// Cluster, where each key is counted alone and another request took the
// last room of one of them meanwhile (fresh attack pass 23 RL-01: 50
// concurrent requests of one address all read room on its GCRA, each
// counted the route-wide windows, 49 were refused, and the route was
// full for everyone); and a rule the store decides beside the sync view
// (hitSplit), when the view refuses after the store counted. Each take
// is the exact inverse of the count, so counts made by other requests
// in between stay: a fixed window is decremented, a GCRA's arrival time
// moved back one emission interval, a sliding window's counter of the
// window the hit was counted in decremented. An uncounted key that has
// expired meanwhile is left alone.

// uncountScriptSource takes back one counted hit per key:
//
//	KEYS[i]                 the key
//	ARGV[4(i-1)+1 .. +4]    "f", 0, 0, 0                    fixed window
//	                        "g", limit, period_ms, 0        GCRA
//	                        "s", limit, window_ms, at_ms    sliding window
//
// at_ms is the store's time at the count (the hit script's now). It
// returns an empty array (the REST store reads an array).
const uncountScriptSource = `
for i, key in ipairs(KEYS) do
  local j = 1 + (i - 1) * 4
  local kind, a, b, at = ARGV[j], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  if kind == 'f' then
    local v = redis.pcall('GET', key)
    if type(v) == 'string' and string.match(v, '^%d+$') and tonumber(v) > 0 then
      redis.call('DECR', key)
    end
  else
    local ttl = redis.call('PTTL', key)
    local v = redis.call('GET', key)
    if v and ttl > 0 then
      if kind == 'g' then
        local tat = tonumber(v)
        if tat then
          local left = ttl - b / a
          if left < 1 then
            redis.call('DEL', key)
          else
            redis.call('SET', key, string.format('%.3f', tat - b / a), 'PX', math.ceil(left))
          end
        end
      else
        local sw, si, sc, sp = string.match(v, '^s(%d+):(%d+):(%d+):(%d+)$')
        if sw and tonumber(sw) == b then
          si, sc, sp = tonumber(si), tonumber(sc), tonumber(sp)
          local idx = math.floor(at / b)
          if si == idx and sc > 0 then
            sc = sc - 1
          elseif si == idx + 1 and sp > 0 then
            sp = sp - 1
          end
          redis.call('SET', key, string.format('s%d:%d:%d:%d', b, si, sc, sp), 'PX', ttl)
        end
      end
    end
  end
end
return {}
`

var uncountScript = redis.NewScript(uncountScriptSource)

var uncountScriptSHA = sha1Hex(uncountScriptSource)

// uncounter is a Store that takes back counted hits (RedisStore,
// RESTStore, MemoryStore).
type uncounter interface {
	// uncount takes back hits, each counted at at[i] (the store's time
	// of its count), in one round trip (one per key on a cluster).
	uncount(ctx context.Context, hits []Hit, at []time.Time) error
}

// uncountArgs returns the uncount script's KEYS and ARGV.
func uncountArgs(hits []Hit, at []time.Time) ([]string, []any) {
	keys := make([]string, len(hits))
	args := make([]any, 0, 4*len(hits))
	for i, h := range hits {
		keys[i] = h.Key
		switch h.Algorithm {
		case GCRA:
			args = append(args, argGCRA, h.Limit, h.Period.Milliseconds(), 0)
		case SlidingWindow:
			args = append(args, argSliding, h.Limit, h.Period.Milliseconds(), at[i].UnixMilli())
		default:
			args = append(args, argFixed, 0, 0, 0)
		}
	}
	return keys, args
}

func (s *RedisStore) uncount(ctx context.Context, hits []Hit, at []time.Time) error {
	if len(hits) == 0 {
		return nil
	}
	if !s.cluster || len(hits) == 1 {
		keys, args := uncountArgs(hits, at)
		if err := uncountScript.Run(ctx, s.c, keys, args...).Err(); err != nil {
			return fmt.Errorf("running the rate-limit uncount script: %w", err)
		}
		return nil
	}
	cmds := s.evalEach(ctx, uncountScript, uncountScriptSource, len(hits), func(i int) ([]string, []any) {
		return uncountArgs(hits[i:i+1], at[i:i+1])
	})
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return fmt.Errorf("running the rate-limit uncount script per key: %w", err)
		}
	}
	return nil
}

func (s *RESTStore) uncount(ctx context.Context, hits []Hit, at []time.Time) error {
	if len(hits) == 0 {
		return nil
	}
	keys, args := uncountArgs(hits, at)
	if _, err := s.evalSHA(ctx, uncountScriptSource, uncountScriptSHA, keys, args); err != nil {
		return fmt.Errorf("running the rate-limit uncount script: %w", err)
	}
	return nil
}

// uncount is the uncount script on the embedded store.
func (s *MemoryStore) uncount(_ context.Context, hits []Hit, at []time.Time) error {
	now := s.now()
	for i, h := range hits {
		sh := s.shard(h.Key)
		sh.mu.Lock()
		if e, ok := sh.keys.Get(h.Key); ok && momentOf(now).before(e.expires) {
			switch h.Algorithm {
			case GCRA:
				e.tat -= float64(h.Period.Milliseconds()) / float64(h.Limit)
				if e.tat <= float64(now.UnixMilli()) {
					e.expires = momentOf(now) // empty: expired
				} else {
					e.expires = momentOf(now).add(time.Duration(math.Ceil(e.tat-float64(now.UnixMilli()))) * time.Millisecond)
				}
			case SlidingWindow:
				w := float64(h.Period.Milliseconds())
				switch idx := math.Floor(float64(at[i].UnixMilli()) / w); {
				case e.sliding.window != w:
				case e.sliding.index == idx && e.sliding.cur > 0:
					e.sliding.cur--
				case e.sliding.index == idx+1 && e.sliding.prev > 0:
					e.sliding.prev--
				}
			default:
				e.n = max(0, e.n-1)
			}
		}
		sh.mu.Unlock()
	}
	return nil
}

var (
	_ uncounter = (*RedisStore)(nil)
	_ uncounter = (*RESTStore)(nil)
	_ uncounter = (*MemoryStore)(nil)
)
