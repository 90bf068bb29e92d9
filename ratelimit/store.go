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
	// Limit is the requests allowed per window: per Period for GCRA and
	// SlidingWindow (for GCRA the burst is Limit as well), per TTL for
	// FixedWindow, where 0 counts without ever refusing.
	Limit int64
	// Period is, for GCRA and SlidingWindow, the window: whole
	// milliseconds, ≥ 1ms.
	Period time.Duration
	// Observe is set for a rule in observe mode: its key's lack of room
	// does not refuse the request (Store.Hit), the rule would-blocks.
	Observe bool

	// dist is the rule's distribution counters (dist.go; nil: none).
	dist *distribution
}

// Count is a Store's answer for one Hit.
type Count struct {
	// N is, for FixedWindow, the key's count with this hit: its value
	// after the increment when Counted, its value + 1 otherwise. The key
	// has room for the hit when N ≤ Hit.Limit.
	N int64
	// TTL is, for FixedWindow, the key's remaining TTL (after the
	// increment when Counted; the window's when the key does not exist).
	TTL time.Duration
	// Counted reports whether the hit was counted into its key: the
	// request passed and the key had room (a fixed window: any count), or
	// the request was refused and the key is a fixed window already full.
	Counted bool
	// Allowed, Remaining, RetryAfter and ResetAfter are the GCRA and
	// SlidingWindow result: Allowed is whether the key had room for the
	// hit (counted or not: see Counted), RetryAfter is 0 when Allowed,
	// else the wait until one more hit passes; Remaining is what is left
	// with this hit counted; ResetAfter is the time until the bucket is
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
	// Hit decides one request's hits together in ONE round trip and
	// writes one Count per Hit into out (len(out) == len(hits)). The
	// request is refused when a hit not Observe finds no room in its key;
	// a refused request is counted into no key that had room, only into
	// the fixed windows already full (where it changes no decision; on a
	// Redis Cluster into no key at all: RedisStore.hitPerKey); a
	// passed request is counted into every key with room and every fixed
	// window. Every key written has a TTL set atomically with its first
	// write. Time is the store's
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
