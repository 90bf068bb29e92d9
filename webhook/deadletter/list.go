// Package deadletter implements `borda dlq list|show|replay`
// (docs/forwarder.md, "Replay runbook"): it inspects the forwarder's
// dead-letter queue without losing a message (List, Show), and replays
// chosen dead letters to the forward queue with an audit row in
// PostgreSQL webhook_replays.
//
// All read the DLQ in one bounded pass of basic.get (until the queue has
// no ready message, at most Limit), holding what they read unacked on
// their own channel. Nothing read is ever returned with basic.nack
// (requeue): on a quorum queue every return counts towards the delivery
// limit (RabbitMQ 4 sets 20 by default; the DLQ has no dead-letter target,
// so the message would be dropped), and listing must be repeatable. A
// message kept in the DLQ is instead put back as a copy: republished to
// the DLQ through the default exchange with a confirm (same body, message
// id and headers, the broker's x-delivery-count dropped), then the
// original acked (putBack). Replay acks the messages it republished to
// the forward queue with a confirm and puts back the others. If the
// process dies mid-pass the broker requeues everything unacked (one
// delivery each); if it dies between a copy's confirm and the original's
// ack, that one letter is in the DLQ twice (docs/forwarder.md).
package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/dlqheader"
	"github.com/olp-edu/borda/webhook/publish"
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
		Source:         dlqheader.String(d.Headers, dlqheader.Source),
		FirstReason:    dlqheader.String(d.Headers, dlqheader.FirstReason),
		Reason:         dlqheader.String(d.Headers, dlqheader.DLQReason),
		Status:         int(dlqheader.Int(d.Headers, dlqheader.DLQStatus)),
		Excerpt:        dlqheader.String(d.Headers, dlqheader.DLQExcerpt),
		Attempts:       int(dlqheader.Int(d.Headers, dlqheader.Attempt)),
		FirstFailure:   dlqheader.Time(d.Headers, dlqheader.FirstFailure),
		DeadLetteredAt: dlqheader.Time(d.Headers, dlqheader.DeadLetteredAt),
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

// Republisher publishes msg with a confirm and returns nil only when the
// broker acked it without returning it: *publish.Publisher, whose confirm
// timeout bounds each put-back and replay.
type Republisher interface {
	PublishTo(ctx context.Context, exchange, key string, msg amqp.Publishing) error
}

var _ Republisher = (*publish.Publisher)(nil)

// putBack keeps d in queue without spending a delivery: it publishes a
// copy (dlqheader.Republishing) to queue through the default exchange with
// a confirm, then acks d. When the copy is not confirmed, d is left
// unacked (the broker returns it when the channel closes, one delivery)
// and the error says so.
func putBack(ctx context.Context, pub Republisher, queue string, d amqp.Delivery) error {
	if err := pub.PublishTo(context.WithoutCancel(ctx), "", queue, dlqheader.Republishing(d)); err != nil {
		return fmt.Errorf("putting %q back into %s: %w", d.MessageId, queue, err)
	}
	if err := d.Ack(false); err != nil {
		return fmt.Errorf("acking the original of %q after putting its copy back (it is in %s twice): %w", d.MessageId, queue, err)
	}
	return nil
}

// List returns up to limit dead letters of queue (0: DefaultLimit),
// oldest first by DeadLetteredAt, and keeps every one of them in the queue
// (putBack, in the order read, so a full pass leaves the order as it
// was). Listing spends no delivery: it can run any number of times on a
// queue with a delivery limit. With more than limit letters a pass sees
// the first limit ones and moves them behind the others, so the next pass
// sees the next ones. conn reads the queue; pub puts the letters back.
func List(ctx context.Context, conn *amqp.Connection, pub Republisher, queue string, limit int) ([]Letter, error) {
	var letters []Letter
	err := readKept(ctx, conn, pub, queue, limit, func(d amqp.Delivery) { letters = append(letters, FromDelivery(d)) })
	slices.SortStableFunc(letters, func(a, b Letter) int { return a.DeadLetteredAt.Compare(b.DeadLetteredAt) })
	return letters, err
}
