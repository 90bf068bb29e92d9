package webhook

import "errors"

// Publish failures. Publish returns an error wrapping exactly one of these;
// Reason maps it to the `reason` member of the ingress's 503 body
// (docs/webhooks.md §3).
var (
	// ErrBrokerUnavailable: no connection or channel to the broker, the
	// channel closed with the confirm outstanding, too many unconfirmed
	// publishes, or the publisher is closing.
	ErrBrokerUnavailable = errors.New("broker unavailable")
	// ErrBrokerBlocked: the broker sent connection.blocked (memory or disk
	// alarm); nothing is published until connection.unblocked.
	ErrBrokerBlocked = errors.New("broker blocked the connection")
	// ErrConfirmTimeout: no confirm within the deadline. The message may
	// still be stored (a retry can duplicate it; consumers dedupe by id).
	ErrConfirmTimeout = errors.New("timed out waiting for the publisher confirm")
	// ErrNack: the broker answered basic.nack.
	ErrNack = errors.New("broker nacked the message")
	// ErrUnroutable: the broker returned the mandatory message (no queue
	// bound to its routing key); an ack that follows a return is a failure.
	ErrUnroutable = errors.New("message returned as unroutable")
)

// Reasons of the ingress's 503 answers, one per publish failure.
const (
	ReasonBrokerUnavailable = "BROKER_UNAVAILABLE"
	ReasonBrokerBlocked     = "BROKER_BLOCKED"
	ReasonConfirmTimeout    = "CONFIRM_TIMEOUT"
	ReasonNack              = "NACK"
	ReasonUnroutable        = "UNROUTABLE_MESSAGE"
)

// Reason returns the 503 reason of a Publish error: one of the Reason*
// constants. Any error that wraps none of the sentinels is
// BROKER_UNAVAILABLE.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrBrokerBlocked):
		return ReasonBrokerBlocked
	case errors.Is(err, ErrConfirmTimeout):
		return ReasonConfirmTimeout
	case errors.Is(err, ErrNack):
		return ReasonNack
	case errors.Is(err, ErrUnroutable):
		return ReasonUnroutable
	default:
		return ReasonBrokerUnavailable
	}
}
