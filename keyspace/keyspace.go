// Package keyspace builds every Redis key Borda reads or writes. Nothing else
// concatenates key strings: a test (keyspace_lint_test.go) fails when a
// package outside this one spells a key prefix.
//
// Keys carry the environment's prefix (olp: production, olp-stg: staging,
// olp-dev: development), so a staging process can never write production
// keys. The layout (docs/rate-limiting.md and docs/telemetry.md, "Keys";
// docs/forwarder.md for the idempotency keys):
//
//	{prefix}rl:{rule}:{subject}                 rate limit, unaligned window (burst)
//	{prefix}rl:{rule}:{subject}:{YYYYMMDDHHMM}  rate limit, clock-aligned window (api, escola)
//	{prefix}cfg:relax:{rule}                    incident relax factor
//	{prefix}m:{endpoint}:{minute}               telemetry counters (and m:escola:, m:blocked:,
//	                                            m:would_block:, m:status:)
//	{prefix}lock:aggregate                      aggregation lock
//	{prefix}wh:fwd2:{source}:{event_id}         forwarder idempotency, per (source, id)
//	{prefix}wh:fwd:{event_id}                   forwarder idempotency before it was per source
//	                                            (read only, until its 7-day TTL ends)
//	{prefix}wh:status:fwd:{instance}            a forwarder's status snapshot (TTL'd)
package keyspace

import (
	"fmt"
	"strings"
	"time"
)

// MinuteLayout is the UTC minute format used in keys (YYYYMMDDHHMM).
const MinuteLayout = "200601021504"

// Keyspace builds keys under one prefix. The zero value is unusable; build
// it with New.
type Keyspace struct {
	prefix string
}

// New returns a Keyspace for prefix, which must be non-empty and end with
// ':' (configs.Config.KeyPrefix gives the validated one).
func New(prefix string) (Keyspace, error) {
	if prefix == "" || !strings.HasSuffix(prefix, ":") {
		return Keyspace{}, fmt.Errorf("keyspace: prefix %q must be non-empty and end with ':'", prefix)
	}
	return Keyspace{prefix: prefix}, nil
}

// MustNew is New for tests and constants; it panics on a bad prefix.
func MustNew(prefix string) Keyspace {
	k, err := New(prefix)
	if err != nil {
		panic(err)
	}
	return k
}

// Prefix returns the prefix every key starts with ("olp:").
func (k Keyspace) Prefix() string { return k.prefix }

// RateLimit is the key of a rule whose window starts at its first hit:
// {prefix}rl:{rule}:{subject} (the burst rule: olp:rl:burst:203.0.113.9).
func (k Keyspace) RateLimit(rule, subject string) string {
	return k.prefix + "rl:" + rule + ":" + subject
}

// RateLimitAt is the key of a rule with clock-aligned windows:
// {prefix}rl:{rule}:{subject}:{YYYYMMDDHHMM}, the minute (UTC) of the
// window's start (olp:rl:api:u-42:202601010650).
func (k Keyspace) RateLimitAt(rule, subject string, windowStart time.Time) string {
	return k.prefix + "rl:" + rule + ":" + subject + ":" + windowStart.UTC().Format(MinuteLayout)
}

// Relax is the key holding a rule's incident relax factor:
// {prefix}cfg:relax:{rule}.
func (k Keyspace) Relax(rule string) string { return k.prefix + "cfg:relax:" + rule }

// RelaxPattern matches every relax key (for SCAN).
func (k Keyspace) RelaxPattern() string { return k.prefix + "cfg:relax:*" }

// Metric is a telemetry counter: {prefix}m:{dimension}:{minute}, where
// dimension is an endpoint ("portal:/api/alunos/{id}") or a kind-qualified
// value ("escola:123", "blocked:portal:/x", "status:429").
func (k Keyspace) Metric(dimension string, minute time.Time) string {
	return k.prefix + "m:" + dimension + ":" + minute.UTC().Format(MinuteLayout)
}

// MetricPattern matches every telemetry counter (for SCAN, never KEYS).
func (k Keyspace) MetricPattern() string { return k.prefix + "m:*" }

// MetricDimension strips the prefix, "m:" and the minute from a counter
// key. ok is false when key is not a counter of this keyspace.
func (k Keyspace) MetricDimension(key string) (dimension string, minute time.Time, ok bool) {
	rest, found := strings.CutPrefix(key, k.prefix+"m:")
	if !found {
		return "", time.Time{}, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 1 {
		return "", time.Time{}, false
	}
	t, err := time.ParseInLocation(MinuteLayout, rest[i+1:], time.UTC)
	if err != nil {
		return "", time.Time{}, false
	}
	return rest[:i], t, true
}

// AggregateLock is the distributed lock of the aggregation:
// {prefix}lock:aggregate.
func (k Keyspace) AggregateLock() string { return k.prefix + "lock:aggregate" }

// AggregateInterval marks an aggregation interval of `borda serve` as done:
// {prefix}lock:aggregate:interval, set after a successful run for 9/10 of
// telemetry.aggregate_every. Replicas skip their turn while it exists; a
// one-shot `borda aggregate` ignores it (docs/telemetry.md).
func (k Keyspace) AggregateInterval() string { return k.prefix + "lock:aggregate:interval" }

// Forward is the forwarder's idempotency key of an event before keys were
// per source: {prefix}wh:fwd:{event_id}. Borda no longer writes it; the
// forwarder still reads it (docs/forwarder.md, "Idempotency keys") until
// the keys written by earlier versions expire.
func (k Keyspace) Forward(eventID string) string { return k.prefix + "wh:fwd:" + eventID }

// ForwardEvent is the forwarder's idempotency key of one source's event:
// {prefix}wh:fwd2:{source}:{event_id} (olp:wh:fwd2:whatsapp:evt-1). Two
// sources' events with the same id have two keys. The source is written
// with '%' and ':' percent-encoded (configured source names hold neither;
// an envelope published by hand may), so the first ':' after "wh:fwd2:"
// always ends the source and no two (source, id) pairs share a key. The
// "wh:fwd2:" family never meets a key of Forward's: those start
// "wh:fwd:".
func (k Keyspace) ForwardEvent(source, eventID string) string {
	return k.prefix + "wh:fwd2:" + escapeSegment(source) + ":" + eventID
}

// escapeSegment percent-encodes '%' and ':' in s.
func escapeSegment(s string) string {
	if !strings.ContainsAny(s, "%:") {
		return s
	}
	return strings.NewReplacer("%", "%25", ":", "%3A").Replace(s)
}

// ForwardStatus is one `borda forward` worker's status snapshot, read by
// the operator page of `borda serve`: {prefix}wh:status:fwd:{instance}
// (docs/operations.md). It is always written with a TTL.
func (k Keyspace) ForwardStatus(instance string) string {
	return k.prefix + "wh:status:fwd:" + instance
}

// ForwardStatusPattern matches every forwarder status snapshot (for SCAN).
func (k Keyspace) ForwardStatusPattern() string { return k.prefix + "wh:status:fwd:*" }

// MetricKindPattern matches the telemetry counters of one kind for one
// minute, {prefix}m:{kind}:*:{YYYYMMDDHHMM} (kind "would_block": the
// observe-mode would-blocks of every endpoint in that minute), for SCAN.
func (k Keyspace) MetricKindPattern(kind string, minute time.Time) string {
	return k.prefix + "m:" + kind + ":*:" + minute.UTC().Format(MinuteLayout)
}

// RateLimitReplicas is the ZSET where synchronizing rate limiters
// register (member: replica id, score: last sync, unix ms), to learn how
// many replicas share the key space: {prefix}rlsync:replicas. Its TTL is
// renewed by every registration.
func (k Keyspace) RateLimitReplicas() string { return k.prefix + "rlsync:replicas" }

// RateLimitExchange is the prefix of the exchange markers of a replica's
// sync calls: {prefix}rlsync:x:{replica}:{exchange}:{call}, each a short
// string (what each key of the call leased) with a TTL of a few seconds,
// that makes a call whose answer was lost safe to send again
// (docs/rate-limiting.md, "A lost answer").
func (k Keyspace) RateLimitExchange(replica string) string {
	return k.prefix + "rlsync:x:" + replica + ":"
}
