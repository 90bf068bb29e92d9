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
// aggregation lock {prefix}lock:aggregate: a run is in progress right now
// (or one crashed less than 10 min ago). This run is skipped, which is not
// a failure. The lock is held only while a run lasts.
var ErrLocked = errors.New("telemetry: another aggregation is running now")

// errIntervalDone is how Run's turn ends when another replica already
// aggregated this interval ({prefix}lock:aggregate:interval exists).
var errIntervalDone = errors.New("telemetry: this interval was aggregated already")

// releaseScript deletes the lock only when it still holds our token
// (compare-and-delete), so a run that outlived its TTL never frees a lock
// another process took since.
var releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
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
