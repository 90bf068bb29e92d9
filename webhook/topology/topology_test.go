package topology

import (
	"reflect"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// recorder is a Declarer that records what is declared and bound.
type recorder struct {
	queues   []string
	args     map[string]amqp.Table
	bindings [][3]string // queue, key, exchange
	// refuse: QueueDeclare answers 406 PRECONDITION_FAILED for these
	// queues unless the arguments are those of the map (the queue as an
	// earlier release declared it); closed: the broker closed the channel.
	refuse map[string]amqp.Table
	closed bool
	opened int
}

func (r *recorder) ExchangeDeclare(string, string, bool, bool, bool, bool, amqp.Table) error {
	return nil
}

func (r *recorder) QueueDeclare(name string, _, _, _, _ bool, args amqp.Table) (amqp.Queue, error) {
	if r.closed {
		return amqp.Queue{}, amqp.ErrClosed
	}
	if old, ok := r.refuse[name]; ok && !reflect.DeepEqual(old, args) {
		r.closed = true
		return amqp.Queue{}, &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - inequivalent arg"}
	}
	r.queues = append(r.queues, name)
	if r.args == nil {
		r.args = map[string]amqp.Table{}
	}
	r.args[name] = args
	return amqp.Queue{Name: name}, nil
}

func (r *recorder) QueueBind(name, key, exchange string, _ bool, _ amqp.Table) error {
	if r.closed {
		return amqp.ErrClosed
	}
	r.bindings = append(r.bindings, [3]string{name, key, exchange})
	return nil
}

func (r *recorder) Close() error { return nil }

// open is DeclareCompatible's opener over one recorder: each call is a
// fresh channel.
func (r *recorder) open() (ClosableDeclarer, error) {
	r.opened++
	r.closed = false
	return r, nil
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

// TestDeclareGuardsEveryQueueAnEventPassesThrough (attack A25): the
// forward queue, the events queue and the DLQ refuse a publish beyond a
// length limit (`x-overflow: reject-publish`) instead of dropping their
// oldest message, an event the broker confirmed; so do the quorum retry
// rungs; the quorum forward queue dead-letters at least once (a full DLQ
// keeps the dead letter in the forward queue). Both queue types.
func TestDeclareGuardsEveryQueueAnEventPassesThrough(t *testing.T) {
	for _, qt := range []QueueType{Quorum, Classic} {
		t.Run(string(qt), func(t *testing.T) {
			top := testTopology()
			top.QueueType = qt
			var r recorder
			if err := top.Declare(&r); err != nil {
				t.Fatal(err)
			}
			guarded := []string{"fwd", "events", "dlq"}
			if qt == Quorum {
				guarded = append(guarded, top.RetryQueue(0))
			}
			for _, q := range guarded {
				if got := r.args[q]["x-overflow"]; got != "reject-publish" {
					t.Errorf("%s: x-overflow = %v, want reject-publish", q, got)
				}
				if got := r.args[q]["x-queue-type"]; got != string(qt) {
					t.Errorf("%s: x-queue-type = %v", q, got)
				}
			}
			strategy := r.args["fwd"]["x-dead-letter-strategy"]
			if qt == Quorum && strategy != "at-least-once" {
				t.Errorf("quorum forward queue: x-dead-letter-strategy = %v, want at-least-once", strategy)
			}
			if qt == Classic && strategy != nil {
				t.Errorf("classic forward queue: x-dead-letter-strategy = %v (quorum only)", strategy)
			}
			if r.args["fwd"]["x-dead-letter-exchange"] != top.DLXExchange || r.args["fwd"]["x-dead-letter-routing-key"] != top.DLQ {
				t.Errorf("forward queue lost its dead-letter target: %v", r.args["fwd"])
			}
		})
	}
}

// TestDeclareCompatibleKeepsQueuesOfThePreviousRelease: queues an earlier
// release declared (the forward queue with its dead-letter target but no
// x-overflow, the DLQ and the events queue with x-queue-type only) answer
// the current arguments with PRECONDITION_FAILED, which closes the
// channel: DeclareCompatible declares them again, on a fresh channel,
// with their old arguments, names them Unguarded, and declares the rest.
// Declare (strict) still fails; so does DeclareCompatible for a queue
// whose arguments are neither (another queue type).
func TestDeclareCompatibleKeepsQueuesOfThePreviousRelease(t *testing.T) {
	top := testTopology()
	old := map[string]amqp.Table{
		"fwd":    {"x-queue-type": "quorum", "x-dead-letter-exchange": DLXExchange, "x-dead-letter-routing-key": "dlq"},
		"events": {"x-queue-type": "quorum"},
		"dlq":    {"x-queue-type": "quorum"},
	}
	r := &recorder{refuse: old}
	if err := top.Declare(r); err == nil || !isPreconditionFailed(err) {
		t.Fatalf("strict Declare over old queues = %v, want PRECONDITION_FAILED", err)
	}

	r = &recorder{refuse: old}
	d, err := top.DeclareCompatible(r.open)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"fwd", "events", "dlq"}; !slices.Equal(d.Unguarded, want) {
		t.Errorf("Unguarded = %v, want %v", d.Unguarded, want)
	}
	if r.opened != 4 {
		t.Errorf("%d channels opened, want 4 (one, then one per refused queue)", r.opened)
	}
	for _, q := range []string{"fwd", "events", "dlq", top.RetryQueue(0)} {
		if !slices.Contains(r.queues, q) {
			t.Errorf("queue %s not declared", q)
		}
	}
	if !slices.Contains(r.bindings, [3]string{"fwd", top.RoutingKey, "ex"}) {
		t.Errorf("the forward queue was not bound after its old declare: %v", r.bindings)
	}

	r = &recorder{refuse: map[string]amqp.Table{"fwd": {"x-queue-type": "classic"}}}
	if _, err := top.DeclareCompatible(r.open); err == nil || !isPreconditionFailed(err) {
		t.Errorf("a forward queue of another type = %v, want PRECONDITION_FAILED", err)
	}

	r = &recorder{}
	if d, err := top.DeclareCompatible(r.open); err != nil || len(d.Unguarded) != 0 {
		t.Errorf("fresh broker: %v, %v; want every queue guarded", d, err)
	}
}
