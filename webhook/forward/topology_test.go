package forward

import (
	"testing"
	"time"
)

// TestForward_DeclaresItsTopologyBeforeConsuming: on a broker without
// the topology, the forwarder's republishing connection declares it
// (topology.DeclareCompatible, as `borda forward` did on a separate
// connection before) before the consumer starts, so `borda forward`
// needs no declare of its own: the forward queue is consumed, the
// ladder and the DLQ exist with the declared arguments, and an event
// published through the exchange is delivered.
func TestForward_DeclaresItsTopologyBeforeConsuming(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, func(c *harnessConfig) { c.Undeclared = true })
	queues := []string{h.top.ForwardQueue, h.top.EventsQueue, h.top.DLQ}
	for i := range h.top.Retry {
		queues = append(queues, h.top.RetryQueue(i))
	}
	for _, q := range queues {
		if err := h.passive(q); err == nil {
			t.Fatalf("queue %s exists before the forwarder started", q)
		}
	}

	f := h.start(nil)
	eventually(t, 15*time.Second, "the forwarder consuming", func() bool { return f.consuming.Load() })
	for _, q := range queues {
		if err := h.passive(q); err != nil {
			t.Fatalf("queue %s once the forwarder consumes: %v", q, err)
		}
	}
	// A declare with other arguments than the topology's would fail
	// (PRECONDITION_FAILED): the forwarder declared exactly this topology.
	ch, err := h.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := h.top.Declare(ch); err != nil {
		t.Fatalf("declaring the topology again: %v", err)
	}
	q, err := ch.QueueDeclarePassive(h.top.ForwardQueue, true, false, false, false, nil)
	if err != nil || q.Consumers != 1 {
		t.Fatalf("forward queue: %d consumers (err %v), want 1", q.Consumers, err)
	}

	h.publish(jsonEnvelope("fresh-1", `{"event":"messages.upsert"}`))
	eventually(t, 10*time.Second, "the event delivered", func() bool { return end.delivered()["fresh-1"] == 1 })
}

// passive reports whether queue exists, on a channel of its own (a
// missing queue closes the channel it was asked on).
func (h *harness) passive(queue string) error {
	h.t.Helper()
	ch, err := h.conn.Channel()
	if err != nil {
		h.t.Fatalf("opening a channel: %v", err)
	}
	defer func() {
		if !ch.IsClosed() {
			ch.Close()
		}
	}()
	_, err = ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	return err
}
