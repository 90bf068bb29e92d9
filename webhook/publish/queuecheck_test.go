package publish

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/internal/brokertest"
	"github.com/olp-edu/borda/webhook/topology"
)

// queueCheckBound is how long a deleted forward queue may go unnoticed in
// the tests: the check interval and room for a loaded machine.
const queueCheckBound = 3*queueCheckEvery + 2*time.Second

// TestPublisher_DeletedForwardQueueIsRefusedUntilItIsBack (issue 23, item
// 3): with the contract's topology the events queue also matches the
// forward routing key, so once the forward queue is deleted a mandatory
// publish is still routed and confirmed: a 200 for an event the forwarder
// never sees. The publisher's passive declare notices within the bound:
// publishes fail with ErrQueueMissing (503 FORWARD_QUEUE_MISSING) and
// Ready fails (/readyz/webhook) until the queue is declared again. The
// publisher here declares no topology, as an ingress without the
// configure permission, so the queue stays missing until the test
// recreates it.
func TestPublisher_DeletedForwardQueueIsRefusedUntilItIsBack(t *testing.T) {
	opts := testOptions(t)
	top := *opts.Topology
	admin := brokertest.NewAdmin(t)
	ch := admin.Channel()
	if err := top.Declare(ch); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	opts.Topology = nil
	opts.CheckQueue, opts.CheckBinding = top.ForwardQueue, top.RoutingKey
	p := newTestPublisher(t, opts)
	ctx := context.Background()
	msg := Message{ID: "qc-1", Body: []byte(`{}`)}
	if err := p.Publish(ctx, msg); err != nil {
		t.Fatalf("publish with the forward queue there: %v", err)
	}

	ch = admin.Channel()
	if _, err := ch.QueueDelete(top.ForwardQueue, false, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	deleted := time.Now()
	var err error
	for err = p.Publish(ctx, msg); !errors.Is(err, ErrQueueMissing); err = p.Publish(ctx, msg) {
		if err != nil {
			t.Fatalf("publish after the delete: %v, want nil (the events queue takes it) or ErrQueueMissing", err)
		}
		if time.Since(deleted) > queueCheckBound {
			t.Fatalf("publishes still confirmed %s after the forward queue was deleted", queueCheckBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Ready(); !errors.Is(err, ErrQueueMissing) {
		t.Errorf("Ready = %v, want ErrQueueMissing", err)
	}
	if n := admin.Count(top.EventsQueue); n < 1 {
		t.Errorf("events queue holds %d messages: the test's topology must bind it to the forward routing key", n)
	}
	if err := p.PublishTo(ctx, p.exchange, "other.key", msgPublishing()); errors.Is(err, ErrQueueMissing) {
		t.Errorf("a publish whose routing key does not reach the forward queue was refused: %v", err)
	}

	ch = admin.Channel()
	if err := top.Declare(ch); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	brokertest.WaitReady(t, p, queueCheckBound)
	if err := p.Publish(ctx, msg); err != nil {
		t.Errorf("publish once the queue is back: %v", err)
	}
}

// TestPublisher_DeletedForwardQueueIsRedeclaredAtOnce: a publisher that
// declares the topology (`borda serve`) brings a deleted forward queue
// back when its check finds it missing, before recording it missing: no
// publish is refused for it and nothing is logged, where waiting for the
// 5 s redeclare would answer 503 FORWARD_QUEUE_MISSING meanwhile. The
// check logs transitions only: a check that finds what the last one found
// logs nothing.
func TestPublisher_DeletedForwardQueueIsRedeclaredAtOnce(t *testing.T) {
	p, top, tape := checkingPublisher(t)
	admin := brokertest.NewAdmin(t)
	ch := admin.Channel()
	if _, err := ch.QueueDelete(top.ForwardQueue, false, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	brokertest.Eventually(t, queueCheckBound, "the forward queue redeclared", func() bool {
		c := admin.Channel()
		defer c.Close()
		_, err := c.QueueDeclarePassive(top.ForwardQueue, true, false, false, false, nil)
		return err == nil
	})
	brokertest.WaitReady(t, p, queueCheckBound)
	notLogged(t, tape, "the queue was recorded missing instead of redeclared at once",
		"the forward queue does not exist", "the forward queue exists again")
	if got := value(t, p.metrics.queueMissing); got != 0 {
		t.Errorf("borda_webhook_forward_queue_missing = %v after the redeclare, want 0", got)
	}
}

func TestTopicMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, key string
		want         bool
	}{
		{"a.b.c", "a.b.c", true}, {"a.b.c", "a.b", false}, {"a.*.c", "a.x.c", true}, {"a.*", "a", false},
		{"a.#", "a", true}, {"a.#", "a.b.c", true}, {"#", "", true}, {"#.c", "a.b.c", true}, {"a.#.c", "a.c", true},
		{"yzex.events.connect.whatsapp.legacy_forward", "yzex.events.connect.whatsapp.legacy_forward", true},
		{"yzex.events.connect.whatsapp.legacy_forward", "yzex.events.connect.whatsapp.other", false},
	} {
		if got := TopicMatch(c.pattern, c.key); got != c.want {
			t.Errorf("TopicMatch(%q, %q) = %v, want %v", c.pattern, c.key, got, c.want)
		}
	}
}

func msgPublishing() amqp.Publishing {
	return amqp.Publishing{Body: []byte(`{}`), DeliveryMode: amqp.Persistent}
}

// A publisher that declares the topology asserts the forward binding again
// after redeclaring when the broker refuses it (the exchange was deleted
// under it): the binding is back before it is ever recorded unbound, so no
// publish is refused (503 FORWARD_UNBOUND) and nothing is logged.
func TestPublisher_DeletedExchangeIsRedeclaredBeforeTheBindingCountsAsLost(t *testing.T) {
	p, top, tape := checkingPublisher(t)
	admin := brokertest.NewAdmin(t)
	ch := admin.Channel()
	if err := ch.ExchangeDelete(top.Exchange, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	brokertest.Eventually(t, queueCheckBound, "the exchange redeclared", func() bool {
		c := admin.Channel()
		defer c.Close()
		return c.ExchangeDeclarePassive(top.Exchange, "topic", true, false, false, false, nil) == nil
	})
	brokertest.WaitReady(t, p, queueCheckBound)
	// Transitions only: a binding never recorded lost is never "asserted
	// again" either.
	notLogged(t, tape, "the binding was recorded lost instead of asserted again after the redeclare",
		"binding cannot be asserted", "binding is asserted again")
	if got := value(t, p.metrics.unbound); got != 0 {
		t.Errorf("borda_webhook_forward_unbound = %v after the redeclare, want 0", got)
	}
}

// checkingPublisher is a publisher that declares the test's topology and
// checks its forward queue and binding, logging into the returned tape.
func checkingPublisher(t *testing.T) (*Publisher, topology.Topology, *logTape) {
	t.Helper()
	opts := testOptions(t)
	top := *opts.Topology
	opts.CheckQueue, opts.CheckBinding = top.ForwardQueue, top.RoutingKey
	tape := &logTape{}
	opts.Logger = slog.New(slog.NewTextHandler(tape, nil))
	return newTestPublisher(t, opts), top, tape
}

// notLogged fails the test for each of lines the tape holds.
func notLogged(t *testing.T, tape *logTape, why string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if strings.Contains(tape.String(), line) {
			t.Errorf("logged %q: %s\n%s", line, why, tape)
		}
	}
}
