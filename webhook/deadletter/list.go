// Package deadletter implements `borda dlq list|replay` (design.md §7): it
// inspects the forwarder's dead-letter queue without losing a message, and
// replays chosen dead letters to the forward queue with an audit row in
// PostgreSQL webhook_replays.
//
// Both read the DLQ in one bounded pass of basic.get (until the queue has
// no ready message, at most Limit), holding what they read unacked on
// their own channel: list then returns every message with basic.nack
// (requeue); replay acks only the messages it republished with a confirm.
// If the process dies mid-pass the broker requeues everything unacked.
package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/forward"
)

// DefaultLimit bounds one pass over the DLQ.
const DefaultLimit = 1000

// Letter is one dead-lettered event.
type Letter struct {
	// ID is the event id (the message_id).
	ID     string
	Source string
	// FirstReason is why the first attempt failed; Reason why the message
	// was finally dead-lettered.
	FirstReason string
	Reason      string
	// Status is the endpoint's last HTTP status (0: none).
	Status   int
	Excerpt  string
	Attempts int
	// FirstFailure and DeadLetteredAt are zero when the headers are absent.
	FirstFailure   time.Time
	DeadLetteredAt time.Time
	// ReceivedAt is when the ingress received the event (from the
	// envelope; zero when undecodable).
	ReceivedAt time.Time
}

// Age is how long ago the event first failed (or, without that header,
// was received), relative to now.
func (l Letter) Age(now time.Time) time.Duration {
	from := l.FirstFailure
	if from.IsZero() {
		from = l.ReceivedAt
	}
	if from.IsZero() {
		return 0
	}
	return now.Sub(from)
}

// FromDelivery reads a dead letter's headers and envelope.
func FromDelivery(d amqp.Delivery) Letter {
	l := Letter{
		ID:             d.MessageId,
		Source:         forward.StringHeader(d.Headers, forward.HeaderSource),
		FirstReason:    forward.StringHeader(d.Headers, forward.HeaderFirstReason),
		Reason:         forward.StringHeader(d.Headers, forward.HeaderDLQReason),
		Status:         int(forward.IntHeader(d.Headers, forward.HeaderDLQStatus)),
		Excerpt:        forward.StringHeader(d.Headers, forward.HeaderDLQExcerpt),
		Attempts:       int(forward.IntHeader(d.Headers, forward.HeaderAttempt)),
		FirstFailure:   forward.TimeHeader(d.Headers, forward.HeaderFirstFailure),
		DeadLetteredAt: forward.TimeHeader(d.Headers, forward.HeaderDeadLetteredAt),
	}
	var head struct {
		ID         string    `json:"id"`
		Source     string    `json:"source"`
		ReceivedAt time.Time `json:"received_at"`
	}
	if json.Unmarshal(d.Body, &head) == nil {
		if l.ID == "" {
			l.ID = head.ID
		}
		if l.Source == "" {
			l.Source = head.Source
		}
		l.ReceivedAt = head.ReceivedAt
	}
	if l.FirstReason == "" {
		l.FirstReason = l.Reason
	}
	return l
}

// pass reads up to limit messages from queue with basic.get, unacked, until
// the queue has no ready message. What it holds is not handed out again,
// so the pass ends; the caller settles each delivery.
func pass(ctx context.Context, ch *amqp.Channel, queue string, limit int) ([]amqp.Delivery, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	var out []amqp.Delivery
	for len(out) < limit {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			return out, fmt.Errorf("reading %s: %w", queue, err)
		}
		if !ok {
			break
		}
		out = append(out, d)
	}
	return out, nil
}

// List returns up to limit dead letters of queue (0: DefaultLimit),
// oldest first by DeadLetteredAt, and returns every one of them to the
// queue. The sort matters: a quorum queue puts the messages a pass returns
// behind the others, so after a pass that stopped at limit the queue is
// rotated and its head is no longer the oldest (nothing is lost; with more
// than limit letters, which ones a pass sees depends on that rotation).
func List(ctx context.Context, conn *amqp.Connection, queue string, limit int) ([]Letter, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening channel: %w", err)
	}
	defer ch.Close()
	got, err := pass(ctx, ch, queue, limit)
	letters := make([]Letter, 0, len(got))
	for _, d := range got {
		letters = append(letters, FromDelivery(d))
	}
	slices.SortStableFunc(letters, func(a, b Letter) int { return a.DeadLetteredAt.Compare(b.DeadLetteredAt) })
	if len(got) > 0 {
		// One nack returns every message of the pass.
		if nerr := got[len(got)-1].Nack(true, true); nerr != nil && err == nil {
			err = fmt.Errorf("returning messages to %s: %w", queue, nerr)
		}
	}
	return letters, err
}
