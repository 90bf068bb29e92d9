// Package queueguard reads the effective length limit and overflow
// behaviour of Borda's queues (the forward queue, the events queue, the
// DLQ) from the RabbitMQ management HTTP API, and refuses the publish that
// could make the broker drop an event it already confirmed
// (docs/reliability.md, "Length limits refuse, never drop").
//
// No AMQP method reveals a queue's effective policy, and the queues'
// `x-overflow: reject-publish` argument does not always win: on a quorum
// queue a policy's "overflow" takes precedence over the argument
// (RabbitMQ's rabbit_quorum_queue looks it up with policy precedence, in
// 3.10 as in 4.x), so a policy {"max-length":N,"overflow":"drop-head"}
// makes the broker drop the oldest confirmed events. A classic queue's
// argument wins. The guard polls the management API, names such queues
// (publish.Guard: borda_webhook_queues_unguarded, /readyz/webhook
// warnings) and, while one is unguarded, refuses a publish routed to it
// (publish.ErrQueueMayDrop, the ingress's 503 QUEUE_MAY_DROP) once its
// depth at the last read plus what this process published since reaches
// the limit minus a headroom.
package queueguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Queue types as the management API names them.
const (
	TypeClassic = "classic"
	TypeQuorum  = "quorum"
)

// Overflow behaviours (RabbitMQ's "overflow" policy key and x-overflow
// argument).
const (
	DropHead         = "drop-head"
	RejectPublish    = "reject-publish"
	RejectPublishDLX = "reject-publish-dlx"
)

// QueueInfo is the part of the management API's
// GET /api/queues/{vhost}/{name} answer the guard reads. Depth fields are
// absent until the queue's first statistics emission (every 5 s by
// default): Messages and MessageBytes are then nil.
type QueueInfo struct {
	Name      string         `json:"name"`
	Vhost     string         `json:"vhost"`
	Type      string         `json:"type"`
	Arguments map[string]any `json:"arguments"`
	// Policy and OperatorPolicy name the policies that apply (null or
	// absent: none).
	Policy         *string `json:"policy"`
	OperatorPolicy *string `json:"operator_policy"`
	// EffectivePolicyDefinition is the policy's definition merged with
	// the operator policy's (for max-length and max-length-bytes the
	// lower value): {} or [] when none applies; absent (nil), like
	// Policy and the depth fields, until the queue's first statistics
	// emission.
	EffectivePolicyDefinition json.RawMessage `json:"effective_policy_definition"`
	Messages                  *int64          `json:"messages"`
	MessageBytes              *int64          `json:"message_bytes"`
}

// ErrNoStatistics: the answer has no effective_policy_definition. The
// management API adds a queue's policy fields with its statistics, which
// a new queue has from its first emission on (collect_statistics_interval,
// 5 s by default): its settings are not known yet.
var ErrNoStatistics = errors.New("the management API has no statistics (policy fields) for the queue yet")

// Settings are a queue's effective length limits and overflow behaviour,
// as the broker applies them.
type Settings struct {
	Type string
	// Overflow is the behaviour the broker applies at a limit: DropHead,
	// RejectPublish or (classic queues) RejectPublishDLX.
	Overflow string
	// OverflowFrom says where Overflow comes from: "policy", "argument"
	// or "default".
	OverflowFrom string
	// MaxLength and MaxLengthBytes are the effective limits (the lower of
	// the argument's and the effective policy's); -1: none (0 is a limit:
	// the queue holds nothing).
	MaxLength, MaxLengthBytes int64
	// Policy and OperatorPolicy name the policies that apply ("" none).
	Policy, OperatorPolicy string
}

// Limited reports whether a length limit applies.
func (s Settings) Limited() bool { return s.MaxLength >= 0 || s.MaxLengthBytes >= 0 }

// Unguarded reports whether the broker drops messages (the oldest,
// confirmed ones) at a limit that applies: a limit and an overflow that is
// not reject-publish (or reject-publish-dlx on a classic queue).
func (s Settings) Unguarded() bool {
	return s.Limited() && s.Overflow != RejectPublish && s.Overflow != RejectPublishDLX
}

// String describes s for logs and readiness notes.
func (s Settings) String() string {
	str := fmt.Sprintf("%s queue, overflow %s (%s)", s.Type, s.Overflow, s.OverflowFrom)
	if s.MaxLength >= 0 {
		str += fmt.Sprintf(", max-length %d", s.MaxLength)
	}
	if s.MaxLengthBytes >= 0 {
		str += fmt.Sprintf(", max-length-bytes %d", s.MaxLengthBytes)
	}
	if s.Policy != "" {
		str += ", policy " + s.Policy
	}
	if s.OperatorPolicy != "" {
		str += ", operator policy " + s.OperatorPolicy
	}
	return str
}

// Effective computes q's effective settings as RabbitMQ resolves a
// queue argument against the effective policy (policy and operator policy
// merged):
//
//   - max-length and max-length-bytes: the lower of the two (both queue
//     types);
//   - overflow on a quorum queue: the policy's when it sets one, else the
//     argument's, else drop-head (rabbit_quorum_queue:
//     args_policy_lookup(<<"overflow">>, fun policy_has_precedence/2, Q));
//     reject-publish-dlx is not supported there and falls back to
//     drop-head;
//   - overflow on a classic queue: the argument's when set, else the
//     policy's, else drop-head (rabbit_amqqueue_process resolves it with
//     res_arg: the argument wins).
//
// An unknown type is read as classic. An unknown overflow value is the
// default, drop-head, as the broker does.
func Effective(q QueueInfo) (Settings, error) {
	if q.EffectivePolicyDefinition == nil {
		return Settings{}, fmt.Errorf("queue %s: %w", q.Name, ErrNoStatistics)
	}
	pol, err := policyDefinition(q.EffectivePolicyDefinition)
	if err != nil {
		return Settings{}, fmt.Errorf("queue %s: effective_policy_definition: %w", q.Name, err)
	}
	s := Settings{Type: q.Type}
	if q.Policy != nil {
		s.Policy = *q.Policy
	}
	if q.OperatorPolicy != nil {
		s.OperatorPolicy = *q.OperatorPolicy
	}
	s.MaxLength = lower(number(q.Arguments["x-max-length"]), number(pol["max-length"]))
	s.MaxLengthBytes = lower(number(q.Arguments["x-max-length-bytes"]), number(pol["max-length-bytes"]))
	argOv, argSet := q.Arguments["x-overflow"].(string)
	polOv, polSet := pol["overflow"].(string)
	switch {
	case q.Type == TypeQuorum && polSet:
		s.Overflow, s.OverflowFrom = polOv, "policy"
	case argSet:
		s.Overflow, s.OverflowFrom = argOv, "argument"
	case polSet:
		s.Overflow, s.OverflowFrom = polOv, "policy"
	default:
		s.Overflow, s.OverflowFrom = DropHead, "default"
	}
	switch {
	case s.Overflow == RejectPublish, s.Overflow == DropHead:
	case s.Overflow == RejectPublishDLX && q.Type != TypeQuorum:
	default:
		s.Overflow = DropHead // unsupported: the broker's default
	}
	return s, nil
}

// policyDefinition decodes effective_policy_definition: an object, or []
// (an empty Erlang proplist) or null for none.
func policyDefinition(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte("[]")) {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// number returns v as a non-negative integer (a JSON number), else -1.
func number(v any) int64 {
	f, ok := v.(float64)
	if !ok || f < 0 || math.IsNaN(f) || f > math.MaxInt64/2 {
		return -1
	}
	return int64(f)
}

// lower returns the lower of the non-negative values of a and b; -1 when
// neither is.
func lower(a, b int64) int64 {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	default:
		return min(a, b)
	}
}
