package ratelimit

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// syncScriptSource merges the pending counts of many keys in one EVAL, on
// the store's clock (Options.Sync; docs/rate-limiting.md,
// "Synchronization"). Per key the replica sends its view (local) and the
// state it last read (base); the script writes local + max(0, stored −
// base) per counter, so a replica alone writes exactly its view and the
// counts of replicas add up, with every key's TTL set in the same call:
//
//	KEYS[i]                 one key per op, then (when ARGV[2] is not empty)
//	                        the replica registry ZSET (keyspace.RateLimitReplicas),
//	                        then (when ARGV[4] > 0) the call's exchange marker
//	ARGV[1]                 0 (use TIME), or a pinned now in unix ms (tests only)
//	ARGV[2]                 the replica's id ("": do not register)
//	ARGV[3]                 the registration's lifetime, ms
//	ARGV[4]                 the exchange marker's lifetime, ms (0: no marker;
//	                        negative: resolve the call, below)
//	ARGV[5]                 the marked call's last moment to run, unix ms (0: none)
//	ARGV[6+10(i-1) .. +9]   kind, a, b, base1..3, local1..4
//	  "f", ttl_ms, lease among (0: none), base n (-1: none), base end, limit, local n, local end, 0, local ttl_ms
//	  "g", limit, period_ms, base tat (-1: none), 0, 0,      local tat (-1: none), 0, 0, lease among
//	  "s", limit, window_ms, base idx (-1: none), cur, prev, local idx (-1: none), cur, prev, lease among
//
// Registering (Options.Sync with more than one replica, docs/rate-limiting.md
// "Quota leasing") is ZADD id now, ZREMRANGEBYSCORE of the members not seen
// within the lifetime and of those dated more than a lifetime ahead (no
// replica registers so: written by hand, they would count for ever; fresh
// attack pass 18 R11), PEXPIRE of the ZSET by the lifetime (no key without
// a TTL) and ZCARD, in the same call as the merge.
//
// An exchange marker makes a call whose answer was lost resolvable
// (Registration.Exchange; docs/rate-limiting.md, "A lost answer"): such a
// call (a reset connection, a deadline passed while the store ran it) may
// have merged, and merging its view again would count the replica's
// passes, and any lease it reserved, twice. A call that runs with a marker
// merges and writes the marker (what each key leased, and a fixed window's
// end then), with the marker's lifetime. The same call sent again to
// resolve it (a negative ARGV[4]) merges nothing and leases nothing: when
// its marker is written it answers each key's state as it is now and what
// the first call leased (a fixed window's lease only while that window
// lasts); when it is not, the first call never ran, and it writes the
// marker (so that the first call, arriving late, merges nothing) and
// answers leased -1 for every key. A call that finds its marker written
// merges nothing either, and a marked call that reaches the store after
// its last moment (ARGV[5]) runs no more: it writes its marker as a call
// that never ran and answers leased -1 (a request delayed on the network
// past its marker's lifetime would otherwise merge again: fresh attack
// pass 18 R02).
//
// It returns 5 strings per key, then the script's now (unix ms), then the
// number of replicas registered (0 when ARGV[2] is empty):
//
//	fixed window:  n, end (unix ms, the store's clock), ended, ttl_ms, leased
//	               (ended 1: a call sent again counted in a window that is
//	               over, KeyState.Ended)
//	GCRA:          tat (%.3f), over, 0, ttl_ms, leased (over 1: the merged
//	               arrival time passed now + period and was cut back to it;
//	               for a reader of the store's answer, the replica reads
//	               only the arrival time)
//	sliding:       idx, cur, prev, ttl_ms, leased
//
// A fixed window is known by its end (KeyState.End, mergeFixed): a view
// counting in a window it read (local end > 0) adds to that window only
// while the store holds it (ends within half a window of each other),
// else its counts are dropped; a view that started its own window (local
// end 0) joins the stored window or starts it with its own TTL. An ask
// ("lease among" N > 0) then reserves the replica's lease, floor(remaining
// / N) (1 while anything remains when the limit is below N), in the merged
// state and answers it as "leased" (SyncOp.LeaseAmong): a fixed window
// adds it to the count, a sliding window to the count of the current
// window (rolled to floor(now / window)), GCRA moves the TAT lease ×
// period / limit past max(tat, now).
//
// ttl_ms 0 means the key is absent. A key holding another algorithm's
// value (a reload changed the rule) is overwritten, as the hit script
// starts such a key afresh. mergeState is the same merge in Go.
const syncScriptSource = `
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function at(idx, i, c, p)
  if i < 0 then return 0 end
  if idx == i then return c end
  if idx == i - 1 then return p end
  return 0
end
-- slack is a GCRA's rounding slack of limit per period (ms): what a
-- pass may leave past now + period (gcraSlack in gcra.go)
local function slack(limit, period)
  return math.min(limit / 1000, period / limit / 2)
end
local function share(limit, rem, among)
  if rem <= 0 then return 0 end
  if limit < among then return 1 end
  return math.floor(rem / among)
end
local id, life, mlife = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local n = #KEYS
local marker, seen = nil, false
local seenLeased, seenEnd = {}, {}
local resolve = mlife < 0
if resolve then mlife = -mlife end
local notAfter = tonumber(ARGV[5])
if mlife > 0 then
  marker = KEYS[n]
  n = n - 1
  seen = redis.call('GET', marker)
  if seen then
    for l, e in string.gmatch(seen, '(%d+):(%d+)') do
      seenLeased[#seenLeased + 1] = tonumber(l)
      seenEnd[#seenEnd + 1] = tonumber(e)
    end
  end
end
local replicas = 0
if id ~= '' then
  local reg = KEYS[n]
  n = n - 1
  redis.call('ZADD', reg, now, id)
  redis.call('ZREMRANGEBYSCORE', reg, '-inf', now - life)
  redis.call('ZREMRANGEBYSCORE', reg, '(' .. (now + life), '+inf')
  redis.call('PEXPIRE', reg, life)
  replicas = redis.call('ZCARD', reg)
end
local out = {}
local late = marker and not seen and not resolve and notAfter > 0 and now > notAfter
if late or (resolve and (not seen or seen == '-')) then
  -- The call never ran (resolved), or comes too late to: a marker so
  -- that it never will, and leased -1 for every key (nothing merged).
  if not seen then redis.call('SET', marker, '-', 'PX', mlife) end
  for i = 1, n do
    out[#out + 1] = '0'
    out[#out + 1] = '0'
    out[#out + 1] = '0'
    out[#out + 1] = '0'
    out[#out + 1] = '-1'
  end
  out[#out + 1] = now
  out[#out + 1] = replicas
  return out
end
for i = 1, n do
  local key = KEYS[i]
  local j = 6 + (i - 1) * 10
  local kind = ARGV[j]
  local a, b = tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2])
  local b1, b2, b3 = tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4]), tonumber(ARGV[j + 5])
  local l1, l2, l3, l4 = tonumber(ARGV[j + 6]), tonumber(ARGV[j + 7]), tonumber(ARGV[j + 8]), tonumber(ARGV[j + 9])
  local r1, r2, r3, rttl, leased = 0, 0, 0, 0, 0
  if seen then
    -- Sent again: read the state only (no view, no lease).
    if kind == 'f' then l1, b = 0, 0 else l1, l4 = -1, 0 end
  end
  if kind == 'f' then
    local g = tonumber(redis.call('GET', key) or '')
    if g ~= nil and math.floor(g) ~= g then g = nil end
    local gttl, gend = 0, 0
    if g ~= nil then
      gttl = redis.call('PTTL', key)
      if gttl < 0 or gttl > a then gttl = a end
      gend = now + gttl
    end
    local tol = a / 2
    if g ~= nil then r1, rttl = g, gttl end
    if l1 > 0 then
      if l2 > 0 then
        if g ~= nil and math.abs(gend - l2) <= tol then
          local other = g
          if b1 >= 0 and math.abs(b2 - l2) <= tol then other = math.max(0, g - b1) end
          r1 = l1 + other
          redis.call('SET', key, r1, 'PX', rttl)
        end
      elseif g ~= nil then
        r1 = l1 + g
        redis.call('SET', key, r1, 'PX', rttl)
      else
        rttl = l4
        if rttl <= 0 or rttl > a then rttl = a end
        r1 = l1
        redis.call('SET', key, r1, 'PX', rttl)
      end
    end
    if b > 0 then
      local rem = b3 - r1
      local lease = 0
      if rem > 0 then
        if b3 < b then lease = 1 else lease = math.floor(rem / b) end
      end
      if lease > 0 then
        if rttl <= 0 then rttl = a end
        r1, leased = r1 + lease, lease
        redis.call('SET', key, r1, 'PX', rttl)
      end
    end
    if rttl > 0 then r2 = now + rttl end
    r1 = string.format('%d', r1)
  elseif kind == 'g' then
    local g = tonumber(redis.call('GET', key) or '')
    if g ~= nil and g < now then g = nil end
    if l1 < 0 then
      if g ~= nil then r1, rttl = g, math.max(1, math.ceil(g - now)) end
    else
      local other = 0
      if g ~= nil then other = math.max(0, g - math.max(b1, now)) end
      local tat = math.max(l1, now) + other
      -- capped at a full bucket: now + b and the slack a pass may leave
      local full = now + b + slack(a, b)
      if tat > full then r2, tat = 1, full end
      if tat > now then
        rttl = math.max(1, math.ceil(tat - now))
        r1 = tat
        redis.call('SET', key, string.format('%.3f', tat), 'PX', rttl)
      end
    end
    if l4 > 0 then
      local interval = b / a
      local rem = a
      if rttl > 0 and r1 > now then rem = math.floor((now + b - r1 + slack(a, b)) / interval) end
      local lease = share(a, rem, l4)
      if lease > 0 then
        local tat = now
        if rttl > 0 then tat = math.max(r1, now) end
        tat = tat + lease * b / a
        rttl = math.max(1, math.ceil(tat - now))
        r1, leased = tat, lease
        redis.call('SET', key, string.format('%.3f', tat), 'PX', rttl)
      end
    end
    r1 = string.format('%.3f', r1)
  else
    local gi, gc, gp = -1, 0, 0
    local v = redis.call('GET', key)
    if v then
      local sw, si, sc, sp = string.match(v, '^s(%d+):(%d+):(%d+):(%d+)$')
      if sw and tonumber(sw) == b then
        gi, gc, gp = tonumber(si), tonumber(sc), tonumber(sp)
        if (gi + 2) * b - now < 1 then gi, gc, gp = -1, 0, 0 end
      end
    end
    if l1 < 0 then
      if gi >= 0 then r1, r2, r3, rttl = gi, gc, gp, (gi + 2) * b - now end
    else
      local r = math.max(l1, gi)
      local c = at(r, l1, l2, l3) + math.max(0, at(r, gi, gc, gp) - at(r, b1, b2, b3))
      local p = at(r - 1, l1, l2, l3) + math.max(0, at(r - 1, gi, gc, gp) - at(r - 1, b1, b2, b3))
      local ttl = (r + 2) * b - now
      if ttl >= 1 and (c > 0 or p > 0) then
        r1, r2, r3, rttl = r, c, p, ttl
        redis.call('SET', key, string.format('s%d:%d:%d:%d', b, r, c, p), 'PX', ttl)
      end
    end
    if l4 > 0 then
      local idx = math.floor(now / b)
      local si, sc, sp = r1, r2, r3
      if rttl <= 0 then si, sc, sp = idx, 0, 0
      elseif si < idx then
        if si == idx - 1 then sp = sc else sp = 0 end
        si, sc = idx, 0
      end
      local rate = at(idx - 1, si, sc, sp) * (b - math.max(0, now - idx * b)) / b + at(idx, si, sc, sp)
      local lease = share(a, math.floor(a - rate), l4)
      if lease > 0 then
        sc = sc + lease
        r1, r2, r3, rttl, leased = si, sc, sp, (si + 2) * b - now, lease
        redis.call('SET', key, string.format('s%d:%d:%d:%d', b, si, sc, sp), 'PX', rttl)
      end
    end
    r1 = string.format('%d', r1)
  end
  if seen then
    leased = seenLeased[i] or 0
    if kind == 'f' and (rttl <= 0 or math.abs(r2 - (seenEnd[i] or 0)) > a / 2) then
      -- The window the call counted and reserved in is over: neither its
      -- view nor its lease is in the state answered.
      leased, r3 = 0, 1
    end
  end
  out[#out + 1] = r1
  out[#out + 1] = string.format('%d', r2)
  out[#out + 1] = string.format('%d', r3)
  out[#out + 1] = string.format('%d', rttl)
  out[#out + 1] = string.format('%d', leased)
end
if marker and not seen then
  local m = {}
  for i = 1, n do
    m[i] = out[5 * i] .. ':' .. out[5 * i - 3]
  end
  redis.call('SET', marker, table.concat(m, ','), 'PX', mlife)
end
out[#out + 1] = now
out[#out + 1] = replicas
return out
`

var syncScriptSHA = sha1Hex(syncScriptSource)

// Registration names the replica registering in a sync call: its id, the
// registry key and the registration's lifetime (the zero ID does not
// register), and the call's exchange marker.
type Registration struct {
	ID  string
	Key string
	TTL time.Duration
	// Exchange, when not empty, is the key of this call's exchange marker
	// (a store call of several script calls suffixes it with each call's
	// index), kept ExchangeTTL: a call sent again with the same Exchange
	// merges nothing a second time and answers what the first one leased
	// (syncScriptSource). Empty: the call is not marked (sending it again
	// counts its view twice).
	Exchange    string
	ExchangeTTL time.Duration
	// NotAfter, when not zero, is the marked call's last moment to run
	// (the store's clock): reaching the store later, it runs no more and
	// answers Leased -1 for every key.
	NotAfter time.Time
	// Resolve sends the marked call again only to learn whether it ran:
	// it merges and leases nothing, and answers each key's state and
	// lease when it ran, or Leased -1 for every key (and stops it from
	// ever running) when it did not.
	Resolve bool
}

// syncArgs returns the sync script's KEYS and ARGV for ops, registering
// reg when it has an ID and marking the call with marker when it is not
// empty (for reg.ExchangeTTL).
func syncArgs(pinnedMS int64, ops []SyncOp, reg Registration, marker string) ([]string, []any) {
	keys := make([]string, len(ops), len(ops)+2)
	args := make([]any, 5, 5+10*len(ops))
	mlife, notAfter := int64(0), int64(0)
	if marker != "" {
		mlife = max(reg.ExchangeTTL.Milliseconds(), 1)
		if reg.Resolve {
			mlife = -mlife
		}
		if !reg.NotAfter.IsZero() {
			notAfter = reg.NotAfter.UnixMilli()
		}
	}
	args[0], args[1], args[2], args[3], args[4] = pinnedMS, reg.ID, max(reg.TTL.Milliseconds(), 1), mlife, notAfter
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	for i, op := range ops {
		keys[i] = op.Hit.Key
		b, l := op.Base, op.Local
		switch op.Hit.Algorithm {
		case GCRA:
			bt, lt := -1.0, -1.0
			if b.present() {
				bt = b.TAT
			}
			if l.present() {
				lt = l.TAT
			}
			args = append(args, "g", op.Hit.Limit, op.Hit.Period.Milliseconds(), num(bt), 0, 0, num(lt), 0, 0, op.LeaseAmong)
		case SlidingWindow:
			bi, li := -1.0, -1.0
			if b.present() {
				bi = b.Index
			}
			if l.present() {
				li = l.Index
			}
			args = append(args, "s", op.Hit.Limit, op.Hit.Period.Milliseconds(), num(bi), num(b.Cur), num(b.Prev), num(li), num(l.Cur), num(l.Prev), op.LeaseAmong)
		default:
			bn, ln := int64(-1), int64(0)
			be, le := 0.0, 0.0
			if b.present() {
				bn, be = b.N, b.End
			}
			if l.present() {
				ln, le = l.N, l.End
			}
			args = append(args, "f", max(op.Hit.TTL.Milliseconds(), 1), op.LeaseAmong, bn, num(be), op.Hit.Limit, ln, num(le), 0, l.TTL.Milliseconds())
		}
	}
	if reg.ID != "" {
		keys = append(keys, reg.Key)
	}
	if marker != "" {
		keys = append(keys, marker)
	}
	return keys, args
}

// exchangeMarker is the marker key of the part-th script call of a store
// call marked reg.Exchange ("" when it is not marked). On a Redis Cluster
// (one op key per call, first) the marker carries the op key's hash slot
// in braces, so that the call's keys share a slot; a key whose slot no
// marker name can carry (no hash tag and a '}' in it) goes unmarked.
func exchangeMarker(reg Registration, part int, cluster bool, first string) string {
	if reg.Exchange == "" {
		return ""
	}
	m := reg.Exchange + ":" + strconv.Itoa(part)
	if !cluster {
		return m
	}
	tag, ok := slotTag(first)
	if !ok {
		return ""
	}
	return m + ":{" + tag + "}"
}

// slotTag returns what Redis Cluster hashes of key (its hash tag: what is
// between the first '{' and the first '}' after it, when not empty; else
// the whole key), and whether a name holding it in braces hashes the
// same: false when the whole key is hashed and holds a '}'.
func slotTag(key string) (string, bool) {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j], true
		}
	}
	return key, !strings.Contains(key, "}")
}

// decodeSync fills out from the sync script's reply (5 values per key,
// then the script's now in unix ms, then the replicas registered) and
// returns that now and that count.
func decodeSync(ops []SyncOp, reply []any, out []KeyState) (time.Time, int64, error) {
	if len(reply) != 5*len(ops)+2 || len(out) != len(ops) {
		return time.Time{}, 0, fmt.Errorf("%w: %d values for %d sync keys", ErrBadReply, len(reply), len(ops))
	}
	var v [5]float64
	for i, op := range ops {
		for k := range v {
			f, err := replyFloat(reply[5*i+k])
			if err != nil {
				return time.Time{}, 0, err
			}
			v[k] = f
		}
		ttl := time.Duration(v[3]) * time.Millisecond
		if v[4] < 0 {
			out[i] = KeyState{Leased: -1} // a resolved call that never ran
			continue
		}
		if ttl <= 0 {
			out[i] = KeyState{Ended: op.Hit.Algorithm != GCRA && op.Hit.Algorithm != SlidingWindow && v[2] > 0}
			continue
		}
		switch op.Hit.Algorithm {
		case GCRA:
			out[i] = KeyState{TAT: v[0], Leased: int64(v[4]), TTL: ttl}
		case SlidingWindow:
			out[i] = KeyState{Index: v[0], Cur: v[1], Prev: v[2], Leased: int64(v[4]), TTL: ttl}
		default:
			out[i] = KeyState{N: int64(v[0]), End: v[1], Leased: int64(v[4]), TTL: ttl, Ended: v[2] > 0}
		}
	}
	now, err := replyFloat(reply[len(reply)-2])
	if err != nil {
		return time.Time{}, 0, err
	}
	n, err := replyFloat(reply[len(reply)-1])
	if err != nil {
		return time.Time{}, 0, err
	}
	return time.UnixMilli(int64(now)), int64(n), nil
}

// replyFloat reads one value of a script reply: an integer (RESP), a
// string (RESP bulk) or a json.Number (REST).
func replyFloat(v any) (float64, error) {
	switch x := v.(type) {
	case int64:
		return float64(x), nil
	case string:
		return strconv.ParseFloat(x, 64)
	case json.Number:
		return x.Float64()
	default:
		return 0, fmt.Errorf("%w: %T where a number was expected", ErrBadReply, v)
	}
}
