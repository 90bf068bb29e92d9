package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrLocked is returned by Aggregate when another process holds the
// aggregation lock (it is aggregating, or aggregated within the hold of
// the runner): this run is skipped, which is not a failure.
var ErrLocked = errors.New("telemetry: another aggregation holds the lock")

// releaseScript deletes the lock only when it still holds our token
// (compare-and-delete), so a run that outlived its TTL never frees a lock
// another process took since.
var releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`)

// holdScript sets the lock's TTL to ARGV[2] ms when it still holds our
// token (compare-and-pexpire): the runner keeps the lock after a
// successful run so replicas on other phases skip the rest of the period.
var holdScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)

// lockStore is the part of a go-redis client the lock uses.
type lockStore interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

// lock is one acquisition of the distributed aggregation lock
// (SET key token NX PX ttl).
type lock struct {
	c     lockStore
	key   string
	token string
}

// acquireLock takes key for ttl, or returns ErrLocked.
func acquireLock(ctx context.Context, c lockStore, key string, ttl time.Duration) (*lock, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	token := hex.EncodeToString(b)
	ok, err := c.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return nil, fmt.Errorf("taking the aggregation lock: %w", err)
	}
	if !ok {
		return nil, ErrLocked
	}
	return &lock{c: c, key: key, token: token}, nil
}

// release deletes the lock if it is still ours.
func (l *lock) release(ctx context.Context) error {
	if err := releaseScript.Run(ctx, l.c, []string{l.key}, l.token).Err(); err != nil {
		return fmt.Errorf("releasing the aggregation lock: %w", err)
	}
	return nil
}

// hold keeps the lock for d from now if it is still ours.
func (l *lock) hold(ctx context.Context, d time.Duration) error {
	if err := holdScript.Run(ctx, l.c, []string{l.key}, l.token, d.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("holding the aggregation lock: %w", err)
	}
	return nil
}
