package topology

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
)

func TestEventsBinding_DerivedFromTheRoutingKey(t *testing.T) {
	for _, c := range []struct{ rk, override, want string }{
		{"yzex.events.connect.whatsapp.legacy_forward", "", EventsBinding},
		{"olp-dev.alice.connect.whatsapp.legacy_forward", "", "olp-dev.alice.connect.whatsapp.#"},
		{"alice", "", "#"},
		{"alice.fwd", "alice.connect.*", "alice.connect.*"},
	} {
		cfg := configs.Default()
		cfg.Webhook.RoutingKey, cfg.Forward.EventsBinding = c.rk, c.override
		if got := FromConfig(cfg).EventsBinding; got != c.want {
			t.Errorf("routing key %q, events_binding %q: binding %q, want %q", c.rk, c.override, got, c.want)
		}
	}
}

// TestPrivateInstanceEventsQueueGetsItsEvents: the documented private
// instance (its own exchange, webhook.routing_key and queues) had an
// events queue bound to the fixed yzex.events.connect.whatsapp.#, so
// `borda consume-events` of that instance never saw an event. Published
// as the ingress does, an event now reaches both the forward queue and the
// events queue.
func TestPrivateInstanceEventsQueueGetsItsEvents(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	name := servicetest.Name(t)
	cfg := configs.Default()
	cfg.Webhook.Exchange = name + ".events"
	cfg.Webhook.RoutingKey = name + ".connect.whatsapp.legacy_forward"
	cfg.Forward.Queue, cfg.Forward.DLQ, cfg.Forward.EventsQueue = name+"-fwd", name+"-dlq", name+"-events"
	cfg.Forward.RetryDelays = []configs.Delay{{Name: "1m", D: time.Minute}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	top := FromConfig(cfg)
	top.RetryExchange, top.DLXExchange = name+"-retry", name+"-dlx"
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	if err := top.Declare(ch); err != nil {
		t.Fatal(err)
	}
	servicetest.DeleteAtCleanup(t, conn,
		[]string{top.ForwardQueue, top.EventsQueue, top.DLQ, top.RetryQueue(0)},
		[]string{top.Exchange, top.RetryExchange, top.DLXExchange})
	if err := ch.PublishWithContext(context.Background(), top.Exchange, top.RoutingKey, true, false,
		amqp.Publishing{MessageId: name, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{top.ForwardQueue, top.EventsQueue} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			d, ok, err := ch.Get(q, true)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				if d.MessageId != name {
					t.Errorf("%s: message %q, want %q", q, d.MessageId, name)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s got no event within 5 s", q)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
