package forward

import (
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/dlqheader"
)

// AMQP headers the forwarder and `borda dlq` write (webhook/dlqheader
// holds the vocabulary; these are its names in this package).
const (
	HeaderAttempt        = dlqheader.Attempt
	HeaderFirstFailure   = dlqheader.FirstFailure
	HeaderFirstReason    = dlqheader.FirstReason
	HeaderDLQReason      = dlqheader.DLQReason
	HeaderDLQStatus      = dlqheader.DLQStatus
	HeaderDLQExcerpt     = dlqheader.DLQExcerpt
	HeaderDeadLetteredAt = dlqheader.DeadLetteredAt
	HeaderSource         = dlqheader.Source
	HeaderReplay         = dlqheader.Replay
	HeaderReplayForce    = dlqheader.ReplayForce
	HeaderDeliveryCount  = dlqheader.DeliveryCount
)

// IntHeader reads an integer header (dlqheader.Int).
func IntHeader(h amqp.Table, name string) int64 { return dlqheader.Int(h, name) }

// StringHeader reads a string header (dlqheader.String).
func StringHeader(h amqp.Table, name string) string { return dlqheader.String(h, name) }

// TimeHeader reads an RFC 3339 header (dlqheader.Time).
func TimeHeader(h amqp.Table, name string) time.Time { return dlqheader.Time(h, name) }

// BoolHeader reads a boolean header (dlqheader.Bool).
func BoolHeader(h amqp.Table, name string) bool { return dlqheader.Bool(h, name) }

// Republishing copies d for a republish (dlqheader.Republishing).
func Republishing(d amqp.Delivery) amqp.Publishing { return dlqheader.Republishing(d) }

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
