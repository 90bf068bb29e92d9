package forward

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/configs"
)

// TestForward_PublishChannelClosedByTheBrokerRecovers: a channel error
// on the confirm-mode publishing channel (here a 404 from dead-lettering
// to an exchange that is gone) closes that channel for good. The
// publisher must replace it (redeclaring the topology), not requeue and
// re-POST the event forever on a dead channel; once the exchange is back
// the event reaches the DLQ.
func TestForward_PublishChannelClosedByTheBrokerRecovers(t *testing.T) {
	end := newLegacy(t, always(action{status: 400}))
	h := newHarness(t, end, nil)
	if err := h.ch.ExchangeDelete(h.top.DLXExchange, false, false); err != nil {
		t.Fatal(err)
	}
	f := h.start(nil)
	h.publish(jsonEnvelope("pc-1", `{}`))
	eventually(t, 5*time.Second, "a first POST", func() bool { return len(end.all()) >= 1 })
	eventually(t, 5*time.Second, "the dead letter refused by the broker", func() bool {
		return f.publishHeld.Load() > 0 || h.depth(h.top.DLQ) == 1
	})
	if err := h.top.Declare(h.ch); err != nil { // the DLX is back (if the publisher has not redeclared it already)
		t.Fatal(err)
	}
	if d := h.dlq(1, 10*time.Second)[0]; d.MessageId != "pc-1" {
		t.Errorf("DLQ message %q, want pc-1", d.MessageId)
	}
}

// TestForward_RetryPublishFailureDoesNotHammerTheEndpoint: when the
// republish to the retry exchange fails (here it is returned: the rung's
// queue is gone), the delivery is requeued; it must not be POSTed again
// at once in a tight loop (no attempt is spent, so nothing else slows it).
func TestForward_RetryPublishFailureDoesNotHammerTheEndpoint(t *testing.T) {
	end := newLegacy(t, always(action{status: 503}))
	h := newHarness(t, end, func(c *configs.Config) {
		c.Forward.RetryDelays = []configs.Delay{{Name: "5s", D: 5 * time.Second}}
	})
	f := h.start(nil)
	// Deleted after the publisher connected (it declares the topology on
	// connect): deleted before, the rung was back before the first POST and
	// the republish never failed.
	eventually(t, 10*time.Second, "the forwarder's publisher connected", func() bool { return f.pub.Ready() == nil })
	if _, err := h.ch.QueueDelete(h.top.RetryQueue(0), false, false, false); err != nil {
		t.Fatal(err)
	}
	h.publish(jsonEnvelope("rh-1", `{}`))
	eventually(t, 5*time.Second, "a first POST", func() bool { return len(end.all()) >= 1 })
	time.Sleep(1500 * time.Millisecond)
	if n := len(end.all()); n > 4 {
		t.Errorf("POSTs in 1.5s while the retry publish fails = %d, want a paced requeue (≤ 4)", n)
	}
	if d := h.depth(h.top.DLQ); d != 0 {
		t.Errorf("DLQ depth %d, want 0 (the event waits in the forward queue)", d)
	}
}

// TestForward_ForcedReplayRedeliveredAfterItsPostIsNotPostedAgain: a
// `dlq replay --force` takes over a "forwarded" key once. If the worker
// dies after the forced POST and its mark but before the ack, the
// redelivery still carries the force header; it must be acked as a
// duplicate, not POSTed a second time.
func TestForward_ForcedReplayRedeliveredAfterItsPostIsNotPostedAgain(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, nil)
	h.rdb.Set(context.Background(), h.keys.ForwardEvent("evolution", "force-1"), valueForwarded, time.Minute)
	var killed atomic.Bool
	f := h.start(func(f *Forwarder) {
		f.afterMark = func(ch *amqp.Channel) {
			if killed.CompareAndSwap(false, true) {
				ch.Close() // the worker dies before its ack: the broker redelivers
			}
		}
	})
	b, err := jsonEnvelope("force-1", `{}`).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ch.PublishWithContext(context.Background(), "", h.top.ForwardQueue, false, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent, MessageId: "force-1", Body: b,
		Headers: amqp.Table{HeaderReplay: "42", HeaderReplayForce: true},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the redelivery to be settled", func() bool {
		return killed.Load() && h.depth(h.top.ForwardQueue) == 0 &&
			value(f.m.outcomes.WithLabelValues("duplicate", "none"))+value(f.m.outcomes.WithLabelValues("delivered", "2xx")) >= 2
	})
	if n := len(end.all()); n != 1 {
		t.Errorf("POSTs = %d, want 1 (one forced POST per replay)", n)
	}
}

// TestForward_RetryRungDeletedLosesNoEvent: the retry rung's queue is
// deleted (after the forwarder's publisher connected and declared it)
// before the event's first failure. The republish to that rung is
// unroutable: the broker must return it (mandatory), and the forwarder
// must hold or requeue the delivery, never ack it on a bare confirm. So
// the event is POSTed again (once the publisher's redeclare, prompted by
// the return, has put the rung back) and reaches the endpoint with a 200
// exactly once. With the return ignored (settle reading only the ack) it
// fails: the event is acked after its 503 and never comes back. A republish confirmed without being routed would ack
// the event after its 503 and it would never come back.
func TestForward_RetryRungDeletedLosesNoEvent(t *testing.T) {
	end := newLegacy(t, func(n int, _ string) action {
		if n == 0 {
			return action{status: 503}
		}
		return action{status: 200}
	})
	h := newHarness(t, end, func(c *configs.Config) {
		c.Forward.RetryDelays = []configs.Delay{{Name: "1s", D: time.Second}}
	})
	f := h.start(nil)
	// The publisher declares the topology when it connects: delete the
	// rung only after that, so the republish meets a missing queue.
	eventually(t, 10*time.Second, "the forwarder's publisher connected", func() bool { return f.pub.Ready() == nil })
	if _, err := h.ch.QueueDelete(h.top.RetryQueue(0), false, false, false); err != nil {
		t.Fatal(err)
	}
	h.publish(jsonEnvelope("rr-1", `{}`))
	eventually(t, 5*time.Second, "a first POST", func() bool { return len(end.all()) >= 1 })
	// The return makes the publisher redeclare the topology (the rung comes
	// back); the held delivery's republish then succeeds.
	eventually(t, 15*time.Second, "the event POSTed again and answered 200", func() bool {
		n := 0
		for _, c := range end.delivered() {
			n += c
		}
		return n >= 1
	})
	for k, c := range end.delivered() {
		if c != 1 {
			t.Errorf("key %s delivered %d times, want 1", k, c)
		}
	}
	if d := h.depth(h.top.DLQ); d != 0 {
		t.Errorf("DLQ depth %d, want 0", d)
	}
}
