package forward

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/keyspace"
)

// Claim is the result of Store.Acquire.
type Claim int

// Claims.
const (
	// Acquired: this worker holds the lease and may POST.
	Acquired Claim = iota + 1
	// AlreadyForwarded: the event reached the endpoint before; ack it.
	AlreadyForwarded
	// Held: another worker holds a live lease; try again after it expires.
	Held
	// AlreadyDead: the event was dead-lettered before and this delivery
	// is not a `borda dlq replay` that may take it over: ack it (a second
	// copy of a dead-lettered event, docs/forwarder.md, "The dedup state
	// machine").
	AlreadyDead
)

// Values of the idempotency key.
const (
	valueForwarded     = "forwarded"
	valueLeasePrefixed = "processing:" // + the lease token
	valueDead          = "dead"        // or "dead:<replay id>" after a replay was dead-lettered again
)

// acquire: SET NX the lease; else report the current state. With a
// replay id (a `dlq replay --force`, ARGV[3]), a "forwarded" key is taken
// over once per replay: not when it already says "forwarded:<that
// replay>", so a redelivery of the forced message is not POSTed again.
// With a replay id (any `dlq replay`, ARGV[4]) a "dead" key is taken over
// the same way: once per replay, not when it says "dead:<that replay>".
// Any other delivery of a dead event is AlreadyDead.
// Returns {claim, pttl}.
var acquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, 0}
end
local v = redis.call('GET', KEYS[1])
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, 0}
end
if v == 'forwarded' or string.sub(v, 1, 10) == 'forwarded:' then
  if ARGV[3] ~= '' and v ~= 'forwarded:' .. ARGV[3] then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return {1, 0}
  end
  return {2, 0}
end
if v == 'dead' or string.sub(v, 1, 5) == 'dead:' then
  if ARGV[4] ~= '' and v ~= 'dead:' .. ARGV[4] then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return {1, 0}
  end
  return {4, 0}
end
return {3, redis.call('PTTL', KEYS[1])}
`)

// markForwarded: only the lease holder (or nobody, when the lease expired
// during the POST) flips the key to ARGV[3] ("forwarded", or
// "forwarded:<replay>" after a forced replay). Returns 1 when the key says
// forwarded afterwards, 2 when it said dead before (the lease expired
// during the POST and another copy was dead-lettered meanwhile: the POST
// happened, so the key says forwarded and a replay of that letter is
// absorbed), 0 when another worker holds it now.
var markScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == false or v == 'forwarded' or string.sub(v, 1, 10) == 'forwarded:' then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
  return 1
end
if v == 'dead' or string.sub(v, 1, 5) == 'dead:' then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
  return 2
end
return 0
`)

// markDeadScript: only the lease holder (or nobody, when the lease
// expired) flips the key to ARGV[3] ("dead", or "dead:<replay>") with the
// retention TTL. Returns 1 when it did, 0 when the key says something else
// (another worker holds it, or forwarded it: that is kept).
var markDeadScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == false then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
  return 1
end
return 0
`)

// release: delete the key only while it still holds this lease.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// legacyScript reads a key written before keys were per source: its
// value ("" when absent) and its PTTL. Read only: Borda no longer writes
// that family. Returns {value, pttl}.
var legacyScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == false then
  return {'', 0}
end
return {v, redis.call('PTTL', KEYS[1])}
`)

// Store keeps the forwarder's idempotency keys in Redis, one per (source,
// event id): keyspace.ForwardEvent, {prefix}wh:fwd2:{source}:{event_id}.
// A key holds "processing:<token>" with the lease TTL while a worker
// POSTs, then "forwarded" or "dead" with the retention TTL (the state
// machine is in docs/forwarder.md, "The dedup state machine"). Every write sets a TTL;
// the transitions are Lua compare-and-set scripts, so only the lease
// holder moves its key.
//
// Keys written before they were per source ({prefix}wh:fwd:{event_id},
// keyspace.Forward) are honoured only for legacySource's events: set it
// when that source was the only one configured while those keys were
// written, so each of them can only be one of its events. For any other
// source (or when legacySource is "") they are ignored and the event is
// POSTed: at-least-once, never a different source's event dropped as a
// duplicate (docs/forwarder.md, "Idempotency keys").
type Store struct {
	rdb          redis.Scripter
	keys         keyspace.Keyspace
	lease        time.Duration
	retention    time.Duration
	legacySource string
}

// NewStore returns a Store. lease must exceed the POST timeout (else two
// redeliveries may both POST); retention is how long "forwarded" is kept;
// legacySource is the source whose events the source-less keys of earlier
// versions still deduplicate ("" : none).
func NewStore(rdb redis.Scripter, keys keyspace.Keyspace, lease, retention time.Duration, legacySource string) *Store {
	return &Store{rdb: rdb, keys: keys, lease: lease, retention: retention, legacySource: legacySource}
}

// Lease identifies one holder of one key.
type Lease struct {
	key   string
	value string
	done  string // what MarkForwarded writes
	dead  string // what MarkDead writes
	// legacy: the claim came from a source-less key of an earlier version
	// (AlreadyForwarded or Held by it).
	legacy string
}

// Key is the Redis key the lease is on (for logs: it holds the source and
// the event id, never the body).
func (l Lease) Key() string { return l.key }

// Legacy is the source-less key of an earlier version that decided the
// claim ("" when the per-source key did).
func (l Lease) Legacy() string { return l.legacy }

// Acquire tries to take the lease of source's eventID with token (unique
// per attempt). forcedReplay is "" or the id of the `dlq replay --force`
// the delivery carries: it takes over a "forwarded" key once per replay
// (the key then says "forwarded:<forcedReplay>"). replay is "" or the id
// of the `dlq replay` (forced or not) the delivery carries: it takes over
// a "dead" key once per replay (dead-lettered again, the key says
// "dead:<replay>"); without it a dead key is AlreadyDead. It returns the
// claim, the lease (valid when Acquired; its Key names the key either
// way) and, when Held, how long the other holder's lease still runs.
func (s *Store) Acquire(ctx context.Context, source, eventID, token, forcedReplay, replay string) (Claim, Lease, time.Duration, error) {
	l := Lease{key: s.keys.ForwardEvent(source, eventID), value: valueLeasePrefixed + token, done: valueForwarded, dead: valueDead}
	if forcedReplay != "" {
		l.done = valueForwarded + ":" + forcedReplay
	}
	if replay != "" {
		l.dead = valueDead + ":" + replay
	}
	res, err := acquireScript.Run(ctx, s.rdb, []string{l.key}, l.value, s.lease.Milliseconds(), forcedReplay, replay).Int64Slice()
	if err != nil {
		return 0, Lease{}, 0, fmt.Errorf("acquiring idempotency key: %w", err)
	}
	if len(res) != 2 || res[0] < 1 || res[0] > 4 {
		return 0, Lease{}, 0, fmt.Errorf("acquiring idempotency key: unexpected reply %v", res)
	}
	claim, held := Claim(res[0]), time.Duration(res[1])*time.Millisecond
	if claim != Acquired || s.legacySource == "" || source != s.legacySource {
		return claim, l, held, nil
	}
	return s.acquireLegacy(ctx, eventID, forcedReplay, l)
}

// acquireLegacy consults the source-less key of eventID once the
// per-source lease l is taken: "forwarded" (or "forwarded:<this
// replay>") makes the event a duplicate (l is marked forwarded, so its
// redeliveries stop at the new key); "processing:…" means a worker of an
// earlier version POSTs it now: Held for that lease's remaining time (l
// released). The legacy key lives on another hash slot of a Redis
// Cluster, hence a second script rather than one over both keys.
func (s *Store) acquireLegacy(ctx context.Context, eventID, forcedReplay string, l Lease) (Claim, Lease, time.Duration, error) {
	legacy := s.keys.Forward(eventID)
	vals, err := legacyScript.Run(ctx, s.rdb, []string{legacy}).Slice()
	if err == nil && len(vals) != 2 {
		err = fmt.Errorf("unexpected reply %v", vals)
	}
	if err != nil {
		_ = s.Release(ctx, l)
		return 0, Lease{}, 0, fmt.Errorf("reading the legacy idempotency key: %w", err)
	}
	v, _ := vals[0].(string)
	pttl, _ := vals[1].(int64)
	forwarded := v == valueForwarded || strings.HasPrefix(v, valueForwarded+":")
	switch {
	case forwarded && (forcedReplay == "" || v == valueForwarded+":"+forcedReplay):
		if _, err := s.MarkForwarded(ctx, l); err != nil {
			return 0, Lease{}, 0, err
		}
		l.legacy = legacy
		return AlreadyForwarded, l, 0, nil
	case strings.HasPrefix(v, valueLeasePrefixed):
		if err := s.Release(ctx, l); err != nil {
			return 0, Lease{}, 0, err
		}
		l.legacy = legacy
		return Held, l, time.Duration(max(pttl, 0)) * time.Millisecond, nil
	}
	return Acquired, l, 0, nil
}

// MarkForwarded flips the lease to "forwarded" with the retention TTL. ok is
// false when another worker took the key after this lease expired; wasDead
// when the key said dead (another copy was dead-lettered while this lease
// had expired; the key says forwarded now).
func (s *Store) MarkForwarded(ctx context.Context, l Lease) (ok bool, err error) {
	ok, _, err = s.markForwarded(ctx, l)
	return ok, err
}

func (s *Store) markForwarded(ctx context.Context, l Lease) (ok, wasDead bool, err error) {
	n, err := markScript.Run(ctx, s.rdb, []string{l.key}, l.value, s.retention.Milliseconds(), l.done).Int64()
	if err != nil {
		return false, false, fmt.Errorf("marking event forwarded: %w", err)
	}
	return n >= 1, n == 2, nil
}

// MarkDead flips the lease to "dead" (or "dead:<replay>") with the
// retention TTL once the event's dead letter is confirmed: a later copy of
// the event is then AlreadyDead, and only a `dlq replay` takes it over.
// ok is false when the key says something else (another worker holds it
// after this lease expired, or it forwarded the event: kept). A lease with
// no key (a bad envelope has no event to key) is a no-op.
func (s *Store) MarkDead(ctx context.Context, l Lease) (ok bool, err error) {
	if l.key == "" {
		return true, nil
	}
	n, err := markDeadScript.Run(ctx, s.rdb, []string{l.key}, l.value, s.retention.Milliseconds(), l.dead).Int64()
	if err != nil {
		return false, fmt.Errorf("marking event dead-lettered: %w", err)
	}
	return n == 1, nil
}

// pingScript is the store's health probe: one round trip that touches no
// key.
var pingScript = redis.NewScript(`return 1`)

// Ping reports whether Redis answers (the forwarder's probe while
// consuming is paused for a store outage).
func (s *Store) Ping(ctx context.Context) error {
	if err := pingScript.Run(ctx, s.rdb, nil).Err(); err != nil {
		return fmt.Errorf("probing the idempotency store: %w", err)
	}
	return nil
}

// Release deletes the key if it still holds l (before a retry: the event
// is not in a terminal state while it waits on the ladder).
func (s *Store) Release(ctx context.Context, l Lease) error {
	if l.key == "" {
		return nil
	}
	if err := releaseScript.Run(ctx, s.rdb, []string{l.key}, l.value).Err(); err != nil {
		return fmt.Errorf("releasing idempotency key: %w", err)
	}
	return nil
}
