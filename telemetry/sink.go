package telemetry

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Increment is one counter's share of a batch: add Delta (> 0) to Key.
type Increment struct {
	Key   string
	Delta int64
}

// Sink stores a batch of counter increments. Add must apply every
// Increment and set each key's TTL to ttl in the same batch, so that no
// counter ever exists without a TTL, and should do it in one round trip.
// It returns an error when the batch may not have been applied; the
// Recorder then drops the batch (it never retries). Add must not keep
// batch after it returns: the Recorder reuses it.
//
// RedisSink is the production Sink; the interface is small so a store
// reached another way (the Upstash REST /multi-exec endpoint) can
// implement it.
type Sink interface {
	Add(ctx context.Context, batch []Increment, ttl time.Duration) error
}

// txPipeliner is the part of a go-redis client RedisSink uses
// (*redis.Client, *redis.ClusterClient and redis.UniversalClient fit).
type txPipeliner interface {
	TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// RedisSink writes batches to Redis as one MULTI/EXEC pipeline of
// INCRBY key delta + EXPIRE key ttl per key: one round trip (one per
// hash slot on a Redis Cluster), atomic, so a connection lost mid-batch
// never leaves a counter without its TTL.
type RedisSink struct {
	c txPipeliner
}

// NewRedisSink returns a Sink writing through c, typically
// redisconn.New's client (no retries, short timeouts).
func NewRedisSink(c redis.UniversalClient) RedisSink { return RedisSink{c: c} }

// Add implements Sink.
func (s RedisSink) Add(ctx context.Context, batch []Increment, ttl time.Duration) error {
	if len(batch) == 0 {
		return nil
	}
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, inc := range batch {
			p.IncrBy(ctx, inc.Key, inc.Delta)
			p.Expire(ctx, inc.Key, ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing %d telemetry counters to redis: %w", len(batch), err)
	}
	return nil
}

var _ Sink = RedisSink{}
