package servicetest

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQPChannel dials url and opens one channel. The connection is closed
// when the test ends, after every cleanup registered later (which may
// still open channels on it: see DeleteAtCleanup).
func AMQPChannel(t testing.TB, url string) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return conn, ch
}

// DeleteAtCleanup deletes queues, then exchanges, on a fresh channel of
// conn when the test ends (a channel the test used may have been closed
// by a broker error). Missing ones are ignored.
func DeleteAtCleanup(t testing.TB, conn *amqp.Connection, queues, exchanges []string) {
	t.Cleanup(func() {
		c, err := conn.Channel()
		if err != nil {
			return
		}
		defer c.Close()
		for _, q := range queues {
			_, _ = c.QueueDelete(q, false, false, false)
		}
		for _, e := range exchanges {
			_ = c.ExchangeDelete(e, false, false)
		}
	})
}
