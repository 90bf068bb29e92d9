package topology

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// recorder is a Declarer that records what is declared and bound.
type recorder struct {
	queues   []string
	bindings [][3]string // queue, key, exchange
}

func (r *recorder) ExchangeDeclare(string, string, bool, bool, bool, bool, amqp.Table) error {
	return nil
}

func (r *recorder) QueueDeclare(name string, _, _, _, _ bool, _ amqp.Table) (amqp.Queue, error) {
	r.queues = append(r.queues, name)
	return amqp.Queue{Name: name}, nil
}

func (r *recorder) QueueBind(name, key, exchange string, _ bool, _ amqp.Table) error {
	r.bindings = append(r.bindings, [3]string{name, key, exchange})
	return nil
}

func testTopology() Topology {
	return Topology{
		Exchange: "ex", RoutingKey: "yzex.events.connect.whatsapp.legacy_forward", ForwardQueue: "fwd", EventsQueue: "events",
		DLQ: "dlq", Retry: []Delay{{Name: "1m", TTL: time.Minute}}, QueueType: Quorum, RetryExchange: RetryExchange, DLXExchange: DLXExchange,
	}
}

// TestDeclareWithoutAnEventsQueue (issue 23, item 4): forward.events_queue
// "" declares and binds no events queue, so the webhook exchange routes
// each event to the forward queue alone (one durable write per event).
// Before, QueueDeclare("") made the broker create a server-named queue
// and bind it to the events pattern: a second write nobody read.
func TestDeclareWithoutAnEventsQueue(t *testing.T) {
	top := testTopology()
	top.EventsQueue = ""
	var r recorder
	if err := top.Declare(&r); err != nil {
		t.Fatal(err)
	}
	for _, q := range r.queues {
		if q == "" {
			t.Error("a queue with an empty name was declared (the broker names it and binds it)")
		}
	}
	for _, b := range r.bindings {
		if b[2] == top.Exchange && b[0] != top.ForwardQueue {
			t.Errorf("queue %q bound to the webhook exchange (%s); want the forward queue alone", b[0], b[1])
		}
	}
}

// TestDeclareBindsTheEventsQueueByDefault: with an events queue it is
// declared and bound to the events pattern.
func TestDeclareBindsTheEventsQueueByDefault(t *testing.T) {
	top := testTopology()
	var r recorder
	if err := top.Declare(&r); err != nil {
		t.Fatal(err)
	}
	want := [3]string{"events", "yzex.events.connect.whatsapp.#", "ex"}
	for _, b := range r.bindings {
		if b == want {
			return
		}
	}
	t.Errorf("bindings %v lack %v", r.bindings, want)
}
