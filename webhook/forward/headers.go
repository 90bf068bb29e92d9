package forward

import (
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP headers the forwarder and `borda dlq` write. Times are RFC 3339 UTC
// strings, counts int64.
const (
	// HeaderAttempt is the number of failed POST attempts so far (absent: 0).
	// The forwarder keeps its own count: x-death is the broker's and
	// changes shape across versions and queue types.
	HeaderAttempt = "x-borda-attempt"
	// HeaderFirstFailure is when the first attempt failed.
	HeaderFirstFailure = "x-borda-first-failure"
	// HeaderFirstReason is why the first attempt failed ("503",
	// "timeout", "rejected 400", "sha256 mismatch").
	HeaderFirstReason = "x-borda-first-reason"
	// HeaderDLQReason says why the message was dead-lettered.
	HeaderDLQReason = "x-borda-dlq-reason"
	// HeaderDLQStatus is the endpoint's last HTTP status (0: none).
	HeaderDLQStatus = "x-borda-dlq-status"
	// HeaderDLQExcerpt is a safe excerpt of the endpoint's last reply.
	HeaderDLQExcerpt = "x-borda-dlq-excerpt"
	// HeaderDeadLetteredAt is when the message was dead-lettered.
	HeaderDeadLetteredAt = "x-borda-dead-lettered-at"
	// HeaderSource is the envelope's source.
	HeaderSource = "x-borda-source"
	// HeaderReplay is set by `borda dlq replay` to the replay's audit id.
	HeaderReplay = "x-borda-replay"
	// HeaderReplayForce (true) makes the forwarder POST even when the event
	// was forwarded before (`borda dlq replay --force`).
	HeaderReplayForce = "x-borda-replay-force"
)

// IntHeader reads an integer header of any AMQP integer type (0 when
// absent or not an integer).
func IntHeader(h amqp.Table, name string) int64 {
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

// StringHeader reads a string header ("" when absent).
func StringHeader(h amqp.Table, name string) string {
	switch v := h[name].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// TimeHeader reads an RFC 3339 header (zero when absent or malformed).
func TimeHeader(h amqp.Table, name string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, StringHeader(h, name))
	if err != nil {
		return time.Time{}
	}
	return t
}

// BoolHeader reads a boolean header (false when absent).
func BoolHeader(h amqp.Table, name string) bool {
	b, _ := h[name].(bool)
	return b
}

// HeaderDeliveryCount is the broker's count of earlier deliveries of a
// message (quorum queues). It belongs to the message in the queue, not to
// the event: Republishing drops it, so a copy starts at zero.
const HeaderDeliveryCount = "x-delivery-count"

// Republishing copies d for a republish: same body, message id, content
// type, timestamp and headers (cloned, so the caller may edit them; the
// broker's x-delivery-count dropped), persistent.
func Republishing(d amqp.Delivery) amqp.Publishing {
	h := make(amqp.Table, len(d.Headers)+6)
	for k, v := range d.Headers {
		if k == HeaderDeliveryCount {
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

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// markFirstFailure records the time and reason of the first failure once.
func markFirstFailure(h amqp.Table, now time.Time, reason string) {
	if _, ok := h[HeaderFirstFailure]; !ok {
		h[HeaderFirstFailure] = formatTime(now)
	}
	if _, ok := h[HeaderFirstReason]; !ok {
		h[HeaderFirstReason] = reason
	}
}

// failureReason describes a failed POST for HeaderFirstReason.
func failureReason(r Result) string {
	if r.Status != 0 {
		return r.Class + " (HTTP " + strconv.Itoa(r.Status) + ")"
	}
	return r.Class
}
