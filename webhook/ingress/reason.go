package ingress

import (
	"errors"

	"github.com/olp-edu/borda/webhook/publish"
)

// Reasons of the ingress's 503 answers, one per publish failure, and
// one for a failure of the ingress itself.
const (
	// ReasonInternalError: the event's envelope could not be built here
	// (the configured redaction could not read the body, the receipt time
	// could not be encoded); nothing reached the broker. Logged at error
	// level; the provider's retry is accepted.
	ReasonInternalError     = "INTERNAL_ERROR"
	ReasonBrokerUnavailable = "BROKER_UNAVAILABLE"
	ReasonBrokerBlocked     = "BROKER_BLOCKED"
	ReasonConfirmTimeout    = "CONFIRM_TIMEOUT"
	ReasonNack              = "NACK"
	ReasonUnroutable        = "UNROUTABLE_MESSAGE"
	// ReasonForwardQueueMissing: the forward queue does not exist (the
	// publisher's passive declare, every second), though the events queue
	// would still take the event (publish.ErrQueueMissing).
	ReasonForwardQueueMissing = "FORWARD_QUEUE_MISSING"
	// ReasonForwardUnbound: the publisher could not assert the forward
	// queue's binding to the webhook exchange (queue.bind, every second,
	// refused), so the event might reach the events queue alone
	// (publish.ErrForwardUnbound).
	ReasonForwardUnbound = "FORWARD_UNBOUND"
	// ReasonQueueMayDrop: a queue the event reaches drops its oldest
	// messages at a length limit (a broker policy's overflow overrides
	// x-overflow: reject-publish, read from the management API) and is
	// near that limit: publishing could make the broker drop an event it
	// already confirmed (publish.ErrQueueMayDrop, webhook/queueguard).
	ReasonQueueMayDrop = "QUEUE_MAY_DROP"
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
	case errors.Is(err, publish.ErrForwardUnbound):
		return ReasonForwardUnbound
	case errors.Is(err, publish.ErrQueueMayDrop):
		return ReasonQueueMayDrop
	default:
		return ReasonBrokerUnavailable
	}
}

// Reasons of a 400 INVALID_PAYLOAD refusal of a body read as JSON that
// parsers would read differently (docs/webhooks.md §3).
const (
	// ReasonInvalidUTF8: the body is not UTF-8 (RFC 8259 §8.1 requires
	// it). encoding/json turns each invalid byte into U+FFFD, Python's
	// json refuses the body: one event, two readings.
	ReasonInvalidUTF8 = "INVALID_UTF8"
	// ReasonDuplicateMember: an object names a member twice (names
	// compared after decoding escapes and under Unicode simple case
	// folding, as encoding/json matches them to struct fields: "Instance"
	// and "instance" are one member to it, two to exact-name readers).
	// encoding/json, JavaScript's JSON.parse, Python's json and
	// PostgreSQL's jsonb keep the last; gjson, jq's `first` paths and many
	// streaming parsers the first: the id Borda derives and the id a
	// consumer reads could differ (RFC 8259 §4: names SHOULD be unique).
	ReasonDuplicateMember = "DUPLICATE_MEMBER"
	// ReasonNumberOutOfRange: a number beyond float64 (1e999999, -1e400:
	// encoding/json refuses it, PHP, Python and JavaScript read infinity)
	// or beyond PostgreSQL's numeric (1e-16384: jsonb refuses the body).
	ReasonNumberOutOfRange = "NUMBER_OUT_OF_RANGE"
	// ReasonAmbiguousForm: a form body (application/x-www-form-urlencoded)
	// that form parsers read differently: a field repeated under one
	// name to some parser (Go reads the first, PHP, Rack and Django the
	// last), the payload field under another spelling PHP reads as it,
	// or a body Go's url.ParseQuery refuses (formRefused).
	ReasonAmbiguousForm = "AMBIGUOUS_FORM"
	// ReasonContentTypeRepeated: two Content-Type field lines (RFC 9110
	// §5.3: it is a singleton field); which one a parser believes is
	// undefined, so the body's kind would be too.
	ReasonContentTypeRepeated = "CONTENT_TYPE_REPEATED"
	// ReasonContentEncoding (415): a content coding other than identity;
	// the ingress decodes none, and the envelope would carry the coded
	// bytes under a media type that does not say so.
	ReasonContentEncoding = "CONTENT_ENCODING_UNSUPPORTED"
)
