package ratelimit

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"
)

// hitScriptSource decides every rule of one request in one EVAL, on the
// store's clock: it reads TIME once, so replica clocks do not matter
// (docs/rate-limiting.md, "One clock"). Redis ≥ 5 replicates scripts by
// their effects, so TIME before a write is allowed; Upstash runs it too.
//
//	KEYS[i]                 one key per rule
//	ARGV[1]                 0 (use TIME), or a pinned now in unix ms (tests only)
//	ARGV[2]                 the mode: "d" decide, "p" peek, "r" refused elsewhere,
//	                        "c" decide, a refusal counted nowhere
//	ARGV[3+4(i-1) .. +3]    "f", ttl_ms, limit, enforce      fixed window
//	                        "g", limit, period_ms, enforce   GCRA (burst = limit)
//	                        "s", limit, window_ms, enforce   sliding window
//
// The request's rules are decided together, in two passes. The first
// reads every key and decides whether it has room for the hit; the
// request is refused when an enforced key (enforce "1") has none. The
// second writes: a passed request counts into every key that had room
// and into every fixed window (an observed one past its limit keeps
// counting, for the distribution); a refused request counts into no key
// that had room, only into the fixed windows already full, whose
// decisions it cannot change (docs/security.md, "Rate limits": one
// subject's refusals never spend a budget another shares). Mode "p"
// writes nothing (a Redis Cluster's first pass, RedisStore.hitPerKey);
// "r" decides as if another key had refused the request; "c" decides as
// "d" but counts a refused request into no key, full windows included
// (a cluster's counting steps: a window that looks full there may hold a
// count about to be taken back).
// A fixed window's limit of 0 never refuses (a hit that only counts).
//
// It returns 4 integers per key, then the script's now (unix ms):
//
//	fixed window:   count with the hit, PTTL, counted (0|1), 0
//	GCRA, sliding:  room (0 none, 1 counted, 2 room but not counted),
//	                remaining, retry_after_ms, reset_after_ms
//
// A fixed window's count with the hit is the key's value after INCR when
// counted, its value + 1 otherwise. A fixed-window key gets its TTL in
// the same script as its first INCR, and a key found without a TTL
// (written by an older, non-atomic limiter: docs/rate-limiting.md,
// "Keys") or with one longer than its window (the window was shortened
// by a reload) gets the window's, so every key has 0 < TTL ≤ window. The
// GCRA math is redis_rate v10's (itself from rwz/redis-gcra), in
// milliseconds.
//
// The sliding window is the weighted two-window counter (Cloudflare's,
// Kong's): windows aligned to the store's clock (index floor(now/window)),
// rate = previous × (window − elapsed)/window + current, a hit passes when
// rate + 1 ≤ limit and only passed hits are counted. Both counters live in
// ONE key, "s{window_ms}:{index}:{current}:{previous}", written with
// PX = time until the current window stops weighing (≤ 2 windows), so the
// key name needs no clock and the rule has one key as the others do.
const hitScriptSource = `
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local mode = ARGV[2]
local write = mode ~= 'p'
local refused = mode == 'r'
local countFull = mode ~= 'c'
local st = {}
for i, key in ipairs(KEYS) do
  local j = 3 + (i - 1) * 4
  local s = {kind = ARGV[j], a = tonumber(ARGV[j + 1]), b = tonumber(ARGV[j + 2])}
  local a, b = s.a, s.b
  if s.kind == 'f' then
    local v = redis.pcall('GET', key)
    local cur = 0
    if type(v) == 'string' and string.match(v, '^%d+$') then
      cur = tonumber(v)
    elseif v then
      -- the key holds a GCRA arrival time or a sliding window (the
      -- rule's algorithm changed on a reload): a fresh window
      s.stale = true
    end
    s.n = cur + 1
    s.ok = b <= 0 or s.n <= b
    s.ttl = a
    if cur > 0 then
      local ttl = redis.call('PTTL', key)
      if ttl < 0 or ttl > a then
        if write then redis.call('PEXPIRE', key, a) end
        ttl = a
      end
      s.ttl = ttl
    end
  elseif s.kind == 's' then
    local idx = math.floor(now / b)
    local cur, prev = 0, 0
    local v = redis.call('GET', key)
    if v then
      local sw, si, sc, sp = string.match(v, '^s(%d+):(%d+):(%d+):(%d+)$')
      if sw and tonumber(sw) == b then
        si = tonumber(si)
        if si >= idx then
          -- the current window (or, should the store's clock step back,
          -- a later one: keep counting in it rather than forget it)
          idx, cur, prev = si, tonumber(sc), tonumber(sp)
        elseif si == idx - 1 then
          prev = tonumber(sc)
        end
      end
    end
    local elapsed = math.max(0, now - idx * b)
    local rate = prev * (b - elapsed) / b + cur
    s.idx, s.cur, s.prev = idx, cur, prev
    s.ok = rate + 1 <= a
    if s.ok then
      s.r2 = math.floor(a - rate - 1)
      s.r4 = math.max(1, (idx + 2) * b - now)
    else
      local retry
      if cur + 1 <= a then
        -- the previous window's weight has to fall: within this window
        retry = b * (1 - (a - 1 - cur) / prev) - elapsed
      else
        -- this window is full: the next one, where it weighs as previous
        local y = 0
        if cur > a - 1 then y = b * (1 - (a - 1) / cur) end
        retry = (b - elapsed) + y
      end
      local reset = 0
      if cur > 0 then
        reset = (idx + 2) * b - now
      elseif prev > 0 then
        reset = (idx + 1) * b - now
      end
      s.r3 = math.max(1, math.ceil(retry))
      s.r4 = math.max(0, math.ceil(reset))
    end
  else
    local interval = b / a
    -- the rounding of the arithmetic a pass may leave past now + b
    -- (gcraSlack: a thousandth of a ms per request, at most half an
    -- interval)
    local slack = math.min(a / 1000, interval / 2)
    local tat = tonumber(redis.call('GET', key) or '')
    if tat == nil or tat < now then tat = now end
    if tat > now + b + slack then
      -- set under a longer period (the window was shortened): an allowed
      -- hit never sets tat past now + period + slack, so neither refusal
      -- nor TTL may outlast the current one. A tat a pass left is never
      -- cut: cut to now + period, each refusal gave the slack back
      tat = now + b + slack
      if write then
        redis.call('SET', key, string.format('%.3f', tat), 'PX', math.ceil(b + slack))
      end
    end
    local new_tat = tat + interval
    -- past the slack, how early the hit is
    local diff = now - (new_tat - b) + slack
    s.tat = new_tat
    s.ok = diff >= 0
    -- The waits are reported within the period (the slack is rounding),
    -- rounded up past the thousandth of a ms the arrival time is kept to:
    -- a wait of exactly 100 ms computed through the slack reads 100.0001
    -- (a float64 near 1.8e12 ms has no finer digits).
    if s.ok then
      s.r2 = math.floor(diff / interval)
      -- the key's TTL, at least 1 ms: a very high limit makes new_tat - now
      -- round to 0, and SET PX 0 is an error that would fail every rule of
      -- the call
      s.px = math.max(1, math.ceil(new_tat - now))
      s.r4 = math.min(s.px, b)
    else
      s.r3 = math.max(1, math.ceil(-diff - 0.001))
      s.r4 = math.min(math.ceil(tat - now), b)
    end
  end
  if not s.ok and ARGV[j + 3] == '1' then refused = true end
  st[i] = s
end
local out = {}
for i, key in ipairs(KEYS) do
  local s = st[i]
  if s.kind == 'f' then
    local counted = 0
    if write and (not refused or (not s.ok and countFull)) then
      if s.stale then redis.call('DEL', key) end
      s.n = redis.call('INCR', key)
      local ttl = redis.call('PTTL', key)
      if ttl < 0 or ttl > s.a then
        redis.call('PEXPIRE', key, s.a)
        ttl = s.a
      end
      s.ttl, counted = ttl, 1
    end
    out[#out + 1] = s.n
    out[#out + 1] = s.ttl
    out[#out + 1] = counted
    out[#out + 1] = 0
  elseif not s.ok then
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = s.r3
    out[#out + 1] = s.r4
  else
    local room = 2
    if write and not refused then
      if s.kind == 's' then
        redis.call('SET', key, string.format('s%d:%d:%d:%d', s.b, s.idx, s.cur + 1, s.prev), 'PX', s.r4)
      else
        redis.call('SET', key, string.format('%.3f', s.tat), 'PX', s.px)
      end
      room = 1
    end
    out[#out + 1] = room
    out[#out + 1] = s.r2
    out[#out + 1] = 0
    out[#out + 1] = s.r4
  end
end
out[#out + 1] = now
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

// Hit modes of the hit script (ARGV[2]): decide the request's hits
// together, peek (decide, write nothing), or count as a request another
// key refused.
const (
	modeDecide  = "d"
	modePeek    = "p"
	modeRefused = "r"
	modeCounted = "c"
)

// The script's per-hit arguments that are always the same, boxed once:
// converting a string variable to any allocates on every request.
var (
	argFixed, argGCRA, argSliding any = "f", "g", "s"
	argEnforce, argObserve        any = "1", "0"
	argModes                          = map[string]any{modeDecide: modeDecide, modePeek: modePeek, modeRefused: modeRefused, modeCounted: modeCounted}
)

// hitArgs returns the script's KEYS and ARGV for hits in mode; pinnedMS
// is 0 (the script reads TIME) except in tests that pin the store's clock.
func hitArgs(pinnedMS int64, mode string, hits []Hit) ([]string, []any) {
	keys := make([]string, len(hits))
	args := make([]any, 2, 2+4*len(hits))
	args[0], args[1] = pinnedMS, argModes[mode]
	for i, h := range hits {
		keys[i] = h.Key
		enforce := argEnforce
		if h.Observe {
			enforce = argObserve
		}
		switch h.Algorithm {
		case GCRA:
			args = append(args, argGCRA, h.Limit, h.Period.Milliseconds(), enforce)
		case SlidingWindow:
			args = append(args, argSliding, h.Limit, h.Period.Milliseconds(), enforce)
		default:
			args = append(args, argFixed, max(h.TTL.Milliseconds(), 1), max(h.Limit, 0), enforce)
		}
	}
	return keys, args
}

// decodeHits fills out from the script's reply (4 integers per hit, then
// the script's now in unix ms) and returns that now.
func decodeHits(hits []Hit, reply []int64, out []Count) (time.Time, error) {
	if len(reply) != 4*len(hits)+1 || len(out) != len(hits) {
		return time.Time{}, fmt.Errorf("%w: %d integers for %d keys", ErrBadReply, len(reply), len(hits))
	}
	for i, h := range hits {
		r := reply[4*i : 4*i+4]
		if h.Algorithm == GCRA || h.Algorithm == SlidingWindow {
			out[i] = Count{
				Allowed:    r[0] >= 1,
				Counted:    r[0] == 1,
				Remaining:  r[1],
				RetryAfter: time.Duration(r[2]) * time.Millisecond,
				ResetAfter: time.Duration(r[3]) * time.Millisecond,
			}
		} else {
			out[i] = Count{N: r[0], TTL: time.Duration(r[1]) * time.Millisecond, Counted: r[2] == 1}
		}
	}
	return time.UnixMilli(reply[len(reply)-1]), nil
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
