package ratelimit

import (
	"context"
	"errors"
	"time"
)

// Algorithm selects how a key counts hits.
type Algorithm uint8

// Algorithms.
const (
	// FixedWindow counts hits in a window that starts at the key's first hit
	// (INCR, with the TTL set atomically on the first increment).
	FixedWindow Algorithm = iota + 1
	// GCRA is the generic cell rate algorithm (a leaky bucket stored as one
	// "theoretical arrival time"), with burst equal to the limit.
	GCRA
	// SlidingWindow is the weighted two-window counter: windows aligned to
	// the store's clock, rate = previous × (window − elapsed)/window +
	// current, a hit passes when rate + 1 ≤ limit (only passed hits count).
	SlidingWindow
)

// Hit is one rule's counting request for one key, as sent to a Store.
type Hit struct {
	// Key is the full Redis key (built by keyspace).
	Key string
	// Algorithm is FixedWindow, GCRA or SlidingWindow.
	Algorithm Algorithm
	// TTL is, for FixedWindow, the TTL the key gets on its first hit
	// (whole milliseconds; ≥ 1ms). A key found without a TTL gets it too.
	TTL time.Duration
	// Limit and Period are, for GCRA and SlidingWindow, the requests
	// allowed per Period (for GCRA the burst is Limit as well); Period is
	// whole milliseconds, ≥ 1ms.
	Limit  int64
	Period time.Duration

	// dist is the rule's distribution counters (dist.go; nil: none).
	dist *distribution
}

// Count is a Store's answer for one Hit.
type Count struct {
	// N is, for FixedWindow, the key's value after the increment.
	N int64
	// TTL is, for FixedWindow, the key's remaining TTL after the increment.
	TTL time.Duration
	// Allowed, Remaining, RetryAfter and ResetAfter are the GCRA and
	// SlidingWindow result: RetryAfter is 0 when Allowed, else the wait
	// until one more hit passes; ResetAfter is the time until the bucket is
	// full again (the sliding rate is back to 0).
	Allowed    bool
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
}

// RelaxValue is a relax key's content: Factor ≥ 1 and its remaining TTL.
// Factor is 0 when the key does not exist or does not hold a number.
type RelaxValue struct {
	Factor float64
	TTL    time.Duration
}

// Store counts hits. Implementations: RedisStore (go-redis, RESP),
// RESTStore (Upstash REST) and MemoryStore (embedded, one instance). The
// same conformance suite (conformance_test.go) runs against all three.
type Store interface {
	// Hit counts one hit on every key of hits in ONE round trip and writes
	// one Count per Hit into out (len(out) == len(hits)). Every key written
	// has a TTL set atomically with its first write. Time is the store's
	// own (Redis TIME inside the script; the MemoryStore's clock), so the
	// callers' clocks do not matter; it is returned as now, the instant the
	// hits were decided at (the zero Time when hits is empty).
	Hit(ctx context.Context, hits []Hit, out []Count) (now time.Time, err error)
	// ReadRelax reads the relax keys in one round trip.
	ReadRelax(ctx context.Context, keys []string) ([]RelaxValue, error)
	// WriteRelax sets key to factor with ttl.
	WriteRelax(ctx context.Context, key string, factor float64, ttl time.Duration) error
	// Ping checks the store is reachable (the breaker's probe).
	Ping(ctx context.Context) error
}

// ErrBadReply is wrapped by stores when a reply does not have the shape
// the script returns.
var ErrBadReply = errors.New("ratelimit: unexpected store reply")
