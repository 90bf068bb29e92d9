package publish

import "errors"

// Publish failures. Publish and PublishTo return an error wrapping
// exactly one of these; the webhook ingress maps each to the `reason`
// member of its 503 body (docs/webhooks.md).
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
	// ErrQueueMayDrop: Options.Guard refused the publish: a queue it
	// reaches drops its oldest messages at a length limit (a broker
	// policy's overflow overrides x-overflow: reject-publish) and is near
	// that limit, so publishing could make the broker drop an event it
	// already confirmed (webhook/queueguard). Nothing was sent.
	ErrQueueMayDrop = errors.New("a queue would drop a confirmed message at its length limit")
)
