// Package forwardstatus shares the state of every `borda forward` worker
// with the operator page of `borda serve`, which runs in other processes
// (docs/operations.md, "The forwarder's state"): each worker writes a
// small JSON Snapshot to Redis under keyspace.ForwardStatus(instance)
// every few seconds with a TTL, and the page reads every live snapshot
// (Read). A worker that stops writing disappears when its key expires.
package forwardstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/keyspace"
)

// Snapshot is one worker's state. Every text in it is safe to show: the
// failure reasons carry the forwarder's redacted reply excerpts, never a
// URL secret or the HMAC secret.
type Snapshot struct {
	// Instance names the worker (host name and PID).
	Instance string `json:"instance"`
	// Breaker is "closed", "half-open" or "open", since BreakerSince.
	Breaker      string    `json:"breaker"`
	BreakerSince time.Time `json:"breaker_since"`
	// LastFailure is the last retryable failure's reason, at
	// LastFailureAt; OpenedBy the one that last opened the breaker.
	LastFailure   string    `json:"last_failure,omitempty"`
	LastFailureAt time.Time `json:"last_failure_at,omitzero"`
	OpenedBy      string    `json:"opened_by,omitempty"`
	Connected     bool      `json:"connected"`
	Consuming     bool      `json:"consuming"`
	// Problems are the worker's readiness problems (empty: ready).
	Problems []string `json:"problems,omitempty"`
	// QueueDepth and DLQDepth are ready messages, OldestAgeSeconds the
	// forward queue's lag, as last sampled by the worker.
	QueueDepth       int64   `json:"queue_depth"`
	DLQDepth         int64   `json:"dlq_depth"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	// SampledAt is when the worker sampled them (zero: not yet, or a
	// worker older than this field).
	SampledAt time.Time `json:"sampled_at,omitzero"`
	// Duplicates counts the events the worker acked without a POST as
	// already forwarded (since it started); LastDuplicateKey is the
	// idempotency key of the last one (source and event id, never the
	// body), at LastDuplicateAt.
	Duplicates       int64     `json:"duplicates,omitempty"`
	LastDuplicateKey string    `json:"last_duplicate_key,omitempty"`
	LastDuplicateAt  time.Time `json:"last_duplicate_at,omitzero"`
	// WrittenAt is when the worker wrote the snapshot.
	WrittenAt time.Time `json:"written_at"`
}

// Defaults of a Writer.
const (
	DefaultEvery = 5 * time.Second
	// DefaultTTL outlives two missed writes, so a live worker never
	// blinks out, and a dead one is gone within half a minute.
	DefaultTTL = 20 * time.Second
)

// Writer writes one worker's Snapshot every Every with a TTL. Build it
// with NewWriter; Start and Stop it (internal/startstop).
type Writer struct {
	startstop.Runner
	rdb   redis.Cmdable
	key   string
	every time.Duration
	ttl   time.Duration
	read  func() Snapshot
	log   *slog.Logger
}

// NewWriter returns a Writer of instance's snapshots, read from read at
// each write (its Instance and WrittenAt are set by the Writer). every
// and ttl of 0 take DefaultEvery and DefaultTTL; ttl must exceed every.
func NewWriter(rdb redis.Cmdable, ks keyspace.Keyspace, instance string, every, ttl time.Duration, read func() Snapshot, log *slog.Logger) (*Writer, error) {
	if every == 0 {
		every = DefaultEvery
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	switch {
	case rdb == nil || read == nil:
		return nil, errors.New("forwardstatus: a Redis client and a read function are required")
	case strings.TrimSpace(instance) == "":
		return nil, errors.New("forwardstatus: instance is required")
	case ttl <= every:
		return nil, fmt.Errorf("forwardstatus: ttl %s must exceed the write interval %s", ttl, every)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Writer{rdb: rdb, key: ks.ForwardStatus(instance), every: every, ttl: ttl, read: func() Snapshot {
		s := read()
		s.Instance = instance
		return s
	}, log: log}, nil
}

// Start writes a first snapshot at once, then every Every until Stop.
func (w *Writer) Start(ctx context.Context) error { return w.Runner.Start(ctx, w.run) }

func (w *Writer) run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		if err := w.Write(ctx); err != nil && ctx.Err() == nil {
			w.log.Debug("writing the forwarder's status snapshot", "err", err)
		}
		select {
		case <-ctx.Done():
			// The snapshot expires by itself; deleting it tells the page
			// at once that this worker is gone.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = w.rdb.Del(dctx, w.key).Err()
			cancel()
			return
		case <-t.C:
		}
	}
}

// Write writes one snapshot now (SET with the TTL).
func (w *Writer) Write(ctx context.Context) error {
	s := w.read()
	s.WrittenAt = time.Now().UTC()
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return w.rdb.Set(ctx, w.key, b, w.ttl).Err()
}

// scanKeys lists one node's keys matching pattern, stopping past
// MaxInstances.
func scanKeys(ctx context.Context, rdb redis.Cmdable, pattern string) ([]string, error) {
	var keys []string
	var cursor uint64
	for {
		batch, next, err := rdb.Scan(ctx, cursor, pattern, 100).Result()
		if err != nil {
			return keys, fmt.Errorf("listing forwarder snapshots: %w", err)
		}
		keys = append(keys, batch...)
		cursor = next
		if cursor == 0 || len(keys) >= MaxInstances {
			return keys, nil
		}
	}
}

// MaxInstances bounds what Read returns.
const MaxInstances = 100

// Read returns the live snapshots of every worker, by instance name, at
// most MaxInstances (a SCAN of keyspace.ForwardStatusPattern, on every
// master of a Redis Cluster client, then one GET each). A snapshot that
// does not decode is skipped.
func Read(ctx context.Context, rdb redis.Cmdable, ks keyspace.Keyspace) ([]Snapshot, error) {
	var keys []string
	var err error
	if cl, ok := rdb.(interface {
		ForEachMaster(context.Context, func(context.Context, *redis.Client) error) error
	}); ok {
		var mu sync.Mutex // the masters are walked concurrently
		err = cl.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			found, err := scanKeys(ctx, node, ks.ForwardStatusPattern())
			mu.Lock()
			defer mu.Unlock()
			keys = append(keys, found...)
			return err
		})
	} else {
		keys, err = scanKeys(ctx, rdb, ks.ForwardStatusPattern())
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) > MaxInstances {
		keys = keys[:MaxInstances]
	}
	out := make([]Snapshot, 0, len(keys))
	for _, k := range keys {
		b, err := rdb.Get(ctx, k).Bytes()
		if errors.Is(err, redis.Nil) {
			continue // expired between SCAN and GET
		}
		if err != nil {
			return out, fmt.Errorf("reading a forwarder snapshot: %w", err)
		}
		var s Snapshot
		if json.Unmarshal(b, &s) == nil {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Snapshot) int { return strings.Compare(a.Instance, b.Instance) })
	return out, nil
}
