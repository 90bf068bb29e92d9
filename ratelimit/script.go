package ratelimit

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"
)

// hitScriptSource decides every rule of one request in one EVAL. It uses
// only INCR, PTTL, PEXPIRE, GET and SET: no TIME (the caller passes its
// clock) and no redis.replicate_commands(), so it runs unchanged on Redis
// 5+, Redis Cluster (one key per call) and Upstash.
//
//	KEYS[i]                 one key per rule
//	ARGV[1]                 now, unix milliseconds
//	ARGV[2+3(i-1) .. +2]    "f", ttl_ms, 0          fixed window
//	                        "g", limit, period_ms   GCRA (burst = limit)
//
// It returns 4 integers per key:
//
//	fixed window: count after INCR, PTTL after INCR, 0, 0
//	GCRA:         allowed (0|1), remaining, retry_after_ms, reset_after_ms
//
// A fixed-window key gets its TTL in the same script as its first INCR,
// and a key found without a TTL (written by an older, non-atomic limiter:
// edge case 15) or with one longer than its window (the window was
// shortened by a reload) gets the window's, so every key has
// 0 < TTL ≤ window. The GCRA math is
// redis_rate v10's (itself from rwz/redis-gcra), in milliseconds.
const hitScriptSource = `
local now = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local j = 2 + (i - 1) * 3
  local a = tonumber(ARGV[j + 1])
  local b = tonumber(ARGV[j + 2])
  if ARGV[j] == 'f' then
    local n = redis.pcall('INCR', key)
    if type(n) == 'table' and n.err then
      -- the key holds a GCRA arrival time (the rule's algorithm changed
      -- on a reload): start a fresh window instead of failing every
      -- request of every rule in this call
      redis.call('DEL', key)
      n = redis.call('INCR', key)
    end
    local ttl = redis.call('PTTL', key)
    if ttl < 0 or ttl > a then
      redis.call('PEXPIRE', key, a)
      ttl = a
    end
    out[#out + 1] = n
    out[#out + 1] = ttl
    out[#out + 1] = 0
    out[#out + 1] = 0
  else
    local interval = b / a
    local tat = tonumber(redis.call('GET', key) or '')
    if tat == nil or tat < now then tat = now end
    if tat > now + b then
      -- set under a longer period (the window was shortened): an allowed
      -- hit never sets tat past now + period, so neither refusal nor TTL
      -- may outlast the current one
      tat = now + b
      redis.call('SET', key, string.format('%.3f', tat), 'PX', b)
    end
    local new_tat = tat + interval
    local diff = now - (new_tat - b)
    if diff < 0 then
      out[#out + 1] = 0
      out[#out + 1] = 0
      out[#out + 1] = math.ceil(-diff)
      out[#out + 1] = math.ceil(tat - now)
    else
      -- at least 1 ms: a very high limit makes new_tat - now round to 0,
      -- and SET PX 0 is an error that would fail every rule of the call
      local reset = math.max(1, math.ceil(new_tat - now))
      redis.call('SET', key, string.format('%.3f', new_tat), 'PX', reset)
      out[#out + 1] = 1
      out[#out + 1] = math.floor(diff / interval)
      out[#out + 1] = 0
      out[#out + 1] = reset
    end
  end
end
return out
`

// relaxScriptSource reads relax keys in one call: per key its value ("" when
// missing) and its PTTL.
const relaxScriptSource = `
local out = {}
for _, key in ipairs(KEYS) do
  out[#out + 1] = redis.call('GET', key) or ''
  out[#out + 1] = redis.call('PTTL', key)
end
return out
`

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// hitArgs returns the script's KEYS and ARGV for hits at now.
func hitArgs(now time.Time, hits []Hit) ([]string, []any) {
	keys := make([]string, len(hits))
	args := make([]any, 1, 1+3*len(hits))
	args[0] = now.UnixMilli()
	for i, h := range hits {
		keys[i] = h.Key
		if h.Algorithm == GCRA {
			args = append(args, "g", h.Limit, h.Period.Milliseconds())
		} else {
			args = append(args, "f", max(h.TTL.Milliseconds(), 1), 0)
		}
	}
	return keys, args
}

// decodeHits fills out from the script's reply (4 integers per hit).
func decodeHits(hits []Hit, reply []int64, out []Count) error {
	if len(reply) != 4*len(hits) || len(out) != len(hits) {
		return fmt.Errorf("%w: %d integers for %d keys", ErrBadReply, len(reply), len(hits))
	}
	for i, h := range hits {
		r := reply[4*i : 4*i+4]
		if h.Algorithm == GCRA {
			out[i] = Count{
				Allowed:    r[0] == 1,
				Remaining:  r[1],
				RetryAfter: time.Duration(r[2]) * time.Millisecond,
				ResetAfter: time.Duration(r[3]) * time.Millisecond,
			}
		} else {
			out[i] = Count{N: r[0], TTL: time.Duration(r[1]) * time.Millisecond}
		}
	}
	return nil
}

// decodeRelax parses the relax script's reply: value and PTTL per key.
func decodeRelax(n int, reply []any) ([]RelaxValue, error) {
	if len(reply) != 2*n {
		return nil, fmt.Errorf("%w: %d values for %d relax keys", ErrBadReply, len(reply), n)
	}
	out := make([]RelaxValue, n)
	for i := range n {
		s, _ := reply[2*i].(string)
		ttl, err := toInt64(reply[2*i+1])
		if err != nil {
			return nil, err
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || ttl <= 0 {
			continue
		}
		out[i] = RelaxValue{Factor: f, TTL: time.Duration(ttl) * time.Millisecond}
	}
	return out, nil
}

func toInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	default:
		return 0, fmt.Errorf("%w: %T where an integer was expected", ErrBadReply, v)
	}
}

// formatFactor renders a relax factor as stored in {prefix}cfg:relax:{rule}.
func formatFactor(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
