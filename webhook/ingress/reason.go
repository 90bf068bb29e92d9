package ingress

import (
	"errors"

	"github.com/olp-edu/borda/webhook/publish"
)

// Reasons of the ingress's 503 answers, one per publish failure.
const (
	ReasonBrokerUnavailable = "BROKER_UNAVAILABLE"
	ReasonBrokerBlocked     = "BROKER_BLOCKED"
	ReasonConfirmTimeout    = "CONFIRM_TIMEOUT"
	ReasonNack              = "NACK"
	ReasonUnroutable        = "UNROUTABLE_MESSAGE"
	// ReasonForwardQueueMissing: the forward queue does not exist (the
	// publisher's passive declare, every second), though the events queue
	// would still take the event (publish.ErrQueueMissing).
	ReasonForwardQueueMissing = "FORWARD_QUEUE_MISSING"
)

// Reason returns the 503 reason of a Publish error: one of the Reason*
// constants. Any error that wraps none of the sentinels is
// BROKER_UNAVAILABLE.
func Reason(err error) string {
	switch {
	case errors.Is(err, publish.ErrBrokerBlocked):
		return ReasonBrokerBlocked
	case errors.Is(err, publish.ErrConfirmTimeout):
		return ReasonConfirmTimeout
	case errors.Is(err, publish.ErrNack):
		return ReasonNack
	case errors.Is(err, publish.ErrUnroutable):
		return ReasonUnroutable
	case errors.Is(err, publish.ErrQueueMissing):
		return ReasonForwardQueueMissing
	default:
		return ReasonBrokerUnavailable
	}
}
