package forward

import (
	"context"
	"fmt"
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
)

// Values of the idempotency key.
const (
	valueForwarded     = "forwarded"
	valueLeasePrefixed = "processing:" // + the lease token
)

// acquire: SET NX the lease; else report the current state. With a
// replay id (a `dlq replay --force`), a "forwarded" key is taken over once
// per replay: not when it already says "forwarded:<that replay>", so a
// redelivery of the forced message is not POSTed again.
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
return {3, redis.call('PTTL', KEYS[1])}
`)

// markForwarded: only the lease holder (or nobody, when the lease expired
// during the POST) flips the key to ARGV[3] ("forwarded", or
// "forwarded:<replay>" after a forced replay). Returns 1 when the key says
// forwarded afterwards, 0 when another worker holds it now.
var markScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == false or v == 'forwarded' or string.sub(v, 1, 10) == 'forwarded:' then
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

// Store keeps the forwarder's idempotency keys ({prefix}wh:fwd:{event_id})
// in Redis. A key holds "processing:<token>" with the lease TTL while a
// worker POSTs, then "forwarded" with the retention TTL. Every write sets a
// TTL; the transitions are Lua compare-and-set scripts, so only the lease
// holder moves its key.
type Store struct {
	rdb       redis.Scripter
	keys      keyspace.Keyspace
	lease     time.Duration
	retention time.Duration
}

// NewStore returns a Store. lease must exceed the POST timeout (else two
// redeliveries may both POST); retention is how long "forwarded" is kept.
func NewStore(rdb redis.Scripter, keys keyspace.Keyspace, lease, retention time.Duration) *Store {
	return &Store{rdb: rdb, keys: keys, lease: lease, retention: retention}
}

// Lease identifies one holder of one key.
type Lease struct {
	key   string
	value string
	done  string // what MarkForwarded writes
}

// Acquire tries to take the lease of eventID with token (unique per
// attempt). forcedReplay is "" or the id of the `dlq replay --force` the
// delivery carries: it takes over a "forwarded" key once per replay (the
// key then says "forwarded:<forcedReplay>"). It returns the claim, the
// lease (valid when Acquired) and, when Held, how long the other holder's
// lease still runs.
func (s *Store) Acquire(ctx context.Context, eventID, token, forcedReplay string) (Claim, Lease, time.Duration, error) {
	l := Lease{key: s.keys.Forward(eventID), value: valueLeasePrefixed + token, done: valueForwarded}
	if forcedReplay != "" {
		l.done = valueForwarded + ":" + forcedReplay
	}
	res, err := acquireScript.Run(ctx, s.rdb, []string{l.key}, l.value, s.lease.Milliseconds(), forcedReplay).Int64Slice()
	if err != nil {
		return 0, Lease{}, 0, fmt.Errorf("acquiring idempotency key: %w", err)
	}
	if len(res) != 2 || res[0] < 1 || res[0] > 3 {
		return 0, Lease{}, 0, fmt.Errorf("acquiring idempotency key: unexpected reply %v", res)
	}
	return Claim(res[0]), l, time.Duration(res[1]) * time.Millisecond, nil
}

// MarkForwarded flips the lease to "forwarded" with the retention TTL. ok is
// false when another worker took the key after this lease expired.
func (s *Store) MarkForwarded(ctx context.Context, l Lease) (ok bool, err error) {
	n, err := markScript.Run(ctx, s.rdb, []string{l.key}, l.value, s.retention.Milliseconds(), l.done).Int64()
	if err != nil {
		return false, fmt.Errorf("marking event forwarded: %w", err)
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

// Release deletes the key if it still holds l (before a retry, and when the
// delivery is dead-lettered, so a replay can be delivered).
func (s *Store) Release(ctx context.Context, l Lease) error {
	if l.key == "" {
		return nil
	}
	if err := releaseScript.Run(ctx, s.rdb, []string{l.key}, l.value).Err(); err != nil {
		return fmt.Errorf("releasing idempotency key: %w", err)
	}
	return nil
}
