package deadletter

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Count returns how many messages of queue are ready (stored and not held
// by a consumer), from a passive queue.declare on a channel of its own: the
// number `dlq list` reports as "in the queue" beside the number it shows.
// It reads nothing and spends no delivery. A missing queue is an error
// (the broker closes the channel with 404 NOT_FOUND).
func Count(conn *amqp.Connection, queue string) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("opening channel: %w", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("counting %s: %w", queue, err)
	}
	return q.Messages, nil
}

// Summary is the line `borda dlq list` ends with: how many dead letters are
// in queue and, when fewer were read, how many are shown and why
// ("2 dead letter(s) in q, 1 shown (--limit 1)"). inQueue < 0 means the
// count failed (countErr says why); a pass that read more than were
// counted (letters arrived meanwhile) reports what it read.
func Summary(queue string, shown, inQueue, limit int, countErr error) string {
	switch {
	case inQueue < 0:
		return fmt.Sprintf("%d dead letter(s) shown from %s (--limit %d); the queue's depth is unknown: %v", shown, queue, limit, countErr)
	case shown >= inQueue:
		return fmt.Sprintf("%d dead letter(s) in %s", shown, queue)
	case limit == 0:
		return fmt.Sprintf("%d dead letter(s) in %s, none shown (--limit 0)", inQueue, queue)
	default:
		return fmt.Sprintf("%d dead letter(s) in %s, %d shown (--limit %d)", inQueue, queue, shown, limit)
	}
}
