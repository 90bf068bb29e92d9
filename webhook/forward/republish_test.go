package forward

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/topology"
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
// queue is no longer bound to it), the delivery is held and the publish
// tried again; it must not be POSTed again meanwhile (no attempt is
// spent, so nothing else slows it). The binding is removed once the
// forwarder has declared its topology: the forwarder declares (and binds)
// the rung when it connects, so a queue deleted before it started was
// simply declared again and the test tested nothing. Unbinding, not
// deleting: deleting a quorum queue the forwarder has just declared
// crashed RabbitMQ 3.x's dead-letter worker until the node refused every
// quorum queue (INTERNAL_ERROR).
func TestForward_RetryPublishFailureDoesNotHammerTheEndpoint(t *testing.T) {
	end := newLegacy(t, always(action{status: 503}))
	h := newHarness(t, end, func(c *harnessConfig) {
		c.Topology.Retry = []topology.Delay{{Name: "5s", TTL: 5 * time.Second}}
	})
	var tape servicetest.LogBuffer
	f := h.start(func(f *Forwarder) { f.log = slog.New(slog.NewTextHandler(&tape, nil)) })
	eventually(t, 10*time.Second, "the forwarder to be ready", func() bool { return len(f.Readiness()) == 0 })
	if err := h.ch.QueueUnbind(h.top.RetryQueue(0), h.top.RetryRoutingKey(0), h.top.RetryExchange, nil); err != nil {
		t.Fatal(err)
	}
	h.publish(jsonEnvelope("rh-1", `{}`))
	eventually(t, 5*time.Second, "a first POST", func() bool { return len(end.all()) >= 1 })
	// The republish failed three times (the third try comes after 1 s and
	// then 2 s of holding): a tight loop would have POSTed hundreds of times
	// meanwhile.
	eventually(t, 15*time.Second, "three failed retry publishes", func() bool {
		return strings.Contains(tape.String(), "tries=3")
	})
	if f.publishHeld.Load() < 1 {
		t.Errorf("no delivery held while its retry publish fails")
	}
	if n := len(end.all()); n != 1 {
		t.Errorf("POSTs while the retry publish failed 3 times = %d, want 1 (the delivery is held, not re-POSTed)", n)
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

// TestForward_RetryRungUnboundLosesNoEvent: the retry rung's queue is
// unbound from the retry exchange (after the forwarder declared it) before
// the event's first failure. The republish to that rung is unroutable: the
// broker must return it (mandatory), and the forwarder must hold the
// delivery, never ack it on a bare confirm. So the event is POSTed again
// (once the publisher's redeclare, prompted by the return, has bound the
// rung again) and reaches the endpoint with a 200 exactly once. With the
// return ignored (settle reading only the ack) it fails: the event is
// acked after its 503 and never comes back. (Unbound, not deleted: see
// TestForward_RetryPublishFailureDoesNotHammerTheEndpoint.)
func TestForward_RetryRungUnboundLosesNoEvent(t *testing.T) {
	end := newLegacy(t, func(n int, _ string) action {
		if n == 0 {
			return action{status: 503}
		}
		return action{status: 200}
	})
	h := newHarness(t, end, func(c *harnessConfig) {
		c.Topology.Retry = []topology.Delay{{Name: "1s", TTL: time.Second}}
	})
	f := h.start(nil)
	eventually(t, 10*time.Second, "the forwarder to be ready", func() bool { return len(f.Readiness()) == 0 })
	if err := h.ch.QueueUnbind(h.top.RetryQueue(0), h.top.RetryRoutingKey(0), h.top.RetryExchange, nil); err != nil {
		t.Fatal(err)
	}
	h.publish(jsonEnvelope("rr-1", `{}`))
	eventually(t, 5*time.Second, "a first POST", func() bool { return len(end.all()) >= 1 })
	eventually(t, 20*time.Second, "the event POSTed again and answered 200", func() bool {
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
