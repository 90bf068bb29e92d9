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
// ErrCannotPutBack. During an alarm a publish is what makes RabbitMQ
// block the connection, and the publish that does may itself still be
// read and answered (seen: one `dlq show` in a CI run whose probe came
// back while the put-back after it was blocked), so the probe is sent
// twice: the second meets the blocked connection.
func canPutBack(ctx context.Context, pub Republisher) error {
	for range probes {
		err := pub.PublishTo(ctx, "", probeKey, amqp.Publishing{Type: "borda.deadletter.probe"})
		if err != nil && !errors.Is(err, publish.ErrUnroutable) {
			return fmt.Errorf("%w: %w", ErrCannotPutBack, err)
		}
	}
	return nil
}

// probes is how many probes canPutBack sends.
const probes = 2
