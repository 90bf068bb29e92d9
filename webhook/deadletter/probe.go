package deadletter

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/publish"
)

// ErrCannotPutBack is returned, wrapping the publisher's error, when the
// broker does not take a publish now (a memory or disk alarm blocks the
// connection, no connection): no pass is started then, since every letter
// it read would go back to the queue when its channel closes, one delivery
// each, and a few listings under a delivery limit would drop them (the DLQ
// has no dead-letter target; docs/forwarder.md, "RabbitMQ 4 and delivery
// limits").
var ErrCannotPutBack = errors.New("the broker does not take publishes now, so no dead letter is read (it could not be put back)")

// probeKey is a routing key no queue can have (RabbitMQ reserves "amq."
// queue names): the probe is always returned unroutable, never stored.
const probeKey = "amq.borda.deadletter-probe"

// canPutBack publishes an empty, unroutable probe through pub and waits
// for the broker's answer: a return (ErrUnroutable) means it takes
// publishes; a blocked connection, a confirm timeout or no connection is
// ErrCannotPutBack. During an alarm the probe's publish is what makes
// RabbitMQ block the connection, so the answer comes at once.
func canPutBack(ctx context.Context, pub Republisher) error {
	err := pub.PublishTo(ctx, "", probeKey, amqp.Publishing{Type: "borda.deadletter.probe"})
	if err == nil || errors.Is(err, publish.ErrUnroutable) {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrCannotPutBack, err)
}
