// Package dlqheader is the vocabulary of the AMQP headers a webhook
// event carries through its retries and into the dead-letter queue: the
// names the forwarder writes and `borda dlq` reads, the readers of their
// values, and the copy a republish starts from. It is a leaf (only
// amqp091-go), so webhook/deadletter reads dead letters without importing
// the forwarder.
package dlqheader

import (
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP headers the forwarder and `borda dlq` write. Times are RFC 3339 UTC
// strings, counts int64.
const (
	// Attempt is the number of failed POST attempts so far (absent: 0).
	// The forwarder keeps its own count: x-death is the broker's and
	// changes shape across versions and queue types.
	Attempt = "x-borda-attempt"
	// FirstFailure is when the first attempt failed.
	FirstFailure = "x-borda-first-failure"
	// FirstReason is why the first attempt failed ("503",
	// "timeout", "rejected 400", "sha256 mismatch").
	FirstReason = "x-borda-first-reason"
	// DLQReason says why the message was dead-lettered.
	DLQReason = "x-borda-dlq-reason"
	// DLQStatus is the endpoint's last HTTP status (0: none).
	DLQStatus = "x-borda-dlq-status"
	// DLQExcerpt is a safe excerpt of the endpoint's last reply.
	DLQExcerpt = "x-borda-dlq-excerpt"
	// DeadLetteredAt is when the message was dead-lettered.
	DeadLetteredAt = "x-borda-dead-lettered-at"
	// Source is the envelope's source.
	Source = "x-borda-source"
	// Replay is set by `borda dlq replay` to the replay's audit id.
	Replay = "x-borda-replay"
	// ReplayForce (true) makes the forwarder POST even when the event
	// was forwarded before (`borda dlq replay --force`).
	ReplayForce = "x-borda-replay-force"
)

// Int reads an integer header of any AMQP integer type (0 when
// absent or not an integer).
func Int(h amqp.Table, name string) int64 {
	switch v := h[name].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int16:
		return int64(v)
	case int8:
		return int64(v)
	case int:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// String reads a string header ("" when absent).
func String(h amqp.Table, name string) string {
	switch v := h[name].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// Time reads an RFC 3339 header (zero when absent or malformed).
func Time(h amqp.Table, name string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, String(h, name))
	if err != nil {
		return time.Time{}
	}
	return t
}

// Bool reads a boolean header (false when absent).
func Bool(h amqp.Table, name string) bool {
	b, _ := h[name].(bool)
	return b
}

// DeliveryCount is the broker's count of earlier deliveries of a
// message (quorum queues). It belongs to the message in the queue, not to
// the event: Republishing drops it, so a copy starts at zero.
const DeliveryCount = "x-delivery-count"

// Republishing copies d for a republish: same body, message id, content
// type, timestamp and headers (cloned, so the caller may edit them; the
// broker's x-delivery-count dropped), persistent.
func Republishing(d amqp.Delivery) amqp.Publishing {
	h := make(amqp.Table, len(d.Headers)+6)
	for k, v := range d.Headers {
		if k == DeliveryCount {
			continue
		}
		h[k] = v
	}
	return amqp.Publishing{
		Headers:         h,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    amqp.Persistent,
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}
