package instances

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/schema"
	"github.com/olp-edu/borda/webhook/envelope"
)

// TestConsumer_DatabaseOutageUnderADeliveryLimitLosesNoEvent: a database
// error used to nack-requeue the event after a pause, one delivery per
// try; the events queue has no dead-letter target, so under RabbitMQ 4's
// default delivery limit of 20 the event was dropped for good during the
// outage. Here the pause is 50 ms (the production 2 s only makes the
// outage that loses events 40 s instead of 1 s) and PostgreSQL stays cut
// until the consumer has tried the event more times than the delivery
// limit, holding it (it is never back in the queue): afterwards the event
// is applied.
func TestConsumer_DatabaseOutageUnderADeliveryLimitLosesNoEvent(t *testing.T) {
	node := servicetest.PrivateBroker(t) // the policy is node-wide state
	amqpURL := servicetest.AMQPURL(t)
	_, dbURL := servicetest.IsolatedDatabase(t)
	if err := schema.Up(context.Background(), dbURL); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := servicetest.NewOutageProxy(t, u.Host)
	u.Host = proxy.Addr()
	pool, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	name := servicetest.Name(t)
	queue, instance := name+"-events", name+"-inst"
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	servicetest.DeleteAtCleanup(t, conn, []string{queue}, nil)
	servicetest.DeliveryLimitPolicy(t, node, name, 20)

	var tape lockedTape
	c, err := New(Options{AMQPURL: amqpURL, Queue: queue, DB: pool, Prefetch: 20, Reconnect: 50 * time.Millisecond, MaxHold: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&tape, nil))})
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetDown(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	env := envelope.New(name+"-ev", "evolution", "application/json", nil,
		payload(t, "evolution-v2-connection-update-2-open.json", instance), time.Now())
	b, _ := env.Encode()
	if err := ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent, MessageId: env.ID, ContentType: envelope.ContentType, Body: b,
	}); err != nil {
		t.Fatal(err)
	}
	// More tries than the delivery limit: a nack-requeue per try would
	// have dropped the event by now.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(tape.String(), "tries=25 "); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the consumer did not try the event 25 times within 30 s of the outage:\n%s", tape.String())
		}
		if !strings.Contains(tape.String(), "tries=1 ") {
			continue // not taken yet
		}
		if q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil); err != nil || q.Messages != 0 {
			t.Fatalf("queue depth %d (%v) during the outage, want 0: the consumer holds the event", q.Messages, err)
		}
	}
	proxy.SetDown(false)
	deadline := time.Now().Add(10 * time.Second)
	for value(c, "applied") < 1 {
		if time.Now().After(deadline) {
			q, _ := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
			t.Fatalf("the event was not applied after the database came back (queue depth %d: it was dropped)", q.Messages)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := readState(t, pool, instance); s.state != "open" {
		t.Errorf("stored state %q, want open", s.state)
	}
}

// lockedTape records log lines for assertions.
type lockedTape struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedTape) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedTape) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
