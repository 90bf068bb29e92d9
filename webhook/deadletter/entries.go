package deadletter

import (
	"context"
	"errors"
	"slices"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/forward"
)

// Entry is a dead letter with the message body it carries: the encoded
// envelope (webhook/envelope), for a preview of the event.
type Entry struct {
	Letter
	Body []byte
}

// ListEntries is List with each letter's body: up to limit dead letters
// of queue (0: DefaultLimit), oldest first by DeadLetteredAt, every one
// put back as a confirmed copy (no delivery spent, the order kept for a
// full pass), as List does.
func ListEntries(ctx context.Context, conn *amqp.Connection, queue string, limit int) ([]Entry, error) {
	pub, err := forward.NewPublisher(conn, putBackTimeout)
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	got, err := pass(ctx, ch, queue, limit)
	out := make([]Entry, 0, len(got))
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, d := range got {
		out = append(out, Entry{Letter: FromDelivery(d), Body: slices.Clone(d.Body)})
		if perr := putBack(ctx, pub, queue, d); perr != nil {
			errs = append(errs, perr)
		}
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return a.DeadLetteredAt.Compare(b.DeadLetteredAt) })
	return out, errors.Join(errs...)
}
