package publish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/internal/brokertest"
	"github.com/olp-edu/borda/webhook/topology"
)

// vhostOptions is testOptions on a vhost of the test's own (policies and
// permissions are the test's to change), with the ingress's forward-queue
// check, and queue type qt.
func vhostOptions(t *testing.T, qt topology.QueueType) (Options, *servicetest.Vhost, *amqp.Connection) {
	t.Helper()
	v := servicetest.NewVhost(t)
	top := topology.Topology{
		Exchange:      "yzex.events",
		RoutingKey:    "yzex.events.connect.whatsapp.legacy_forward",
		ForwardQueue:  "fwd",
		EventsQueue:   "events",
		DLQ:           "dlq",
		Retry:         []topology.Delay{{Name: "1m", TTL: time.Minute}},
		QueueType:     qt,
		RetryExchange: topology.RetryExchange,
		DLXExchange:   topology.DLXExchange,
	}
	admin, err := amqp.Dial(v.URL)
	if err != nil {
		t.Fatalf("dialing the test's vhost: %v", err)
	}
	t.Cleanup(func() { admin.Close() })
	return Options{
		URL: v.UserURL, Exchange: top.Exchange, RoutingKey: top.RoutingKey, Topology: &top,
		CheckQueue: top.ForwardQueue, CheckBinding: top.RoutingKey,
		Channels: 2, MaxInFlight: 64, ConfirmTimeout: faultConfirmTimeout,
	}, v, admin
}

func vhostCount(t *testing.T, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspecting %s: %v", queue, err)
	}
	return q.Messages
}

// TestPublisher_MaxLengthPolicyIsRefusedNotDropped (attack A25): a
// platform team's max-length policy (here 2) on the forward queue and the
// DLQ. Before, both were declared without x-overflow, so the broker
// confirmed every publish and dropped the oldest events at the head (into
// the DLQ, itself capped, where they were dropped for good): 200s for
// lost events. Now a publish beyond the limit is nacked (503 NACK), and
// every confirmed message is still in the forward queue; the DLQ holds
// nothing. max-length-bytes is the same overflow setting. Both queue
// types.
func TestPublisher_MaxLengthPolicyIsRefusedNotDropped(t *testing.T) {
	for _, c := range []struct {
		qt     topology.QueueType
		policy string
	}{
		{topology.Quorum, `{"max-length":2}`},
		{topology.Classic, `{"max-length":2}`},
		{topology.Classic, `{"max-length-bytes":40}`},
	} {
		t.Run(string(c.qt)+"/"+strings.Trim(strings.SplitN(c.policy, ":", 2)[0], `{"`), func(t *testing.T) {
			opts, v, admin := vhostOptions(t, c.qt)
			v.SetPolicy("cap", "^(fwd|dlq|events)$", c.policy)
			p := newTestPublisher(t, opts)
			var confirmed, nacked int
			for i := range 8 {
				err := p.Publish(context.Background(), Message{ID: "cap-" + strconv.Itoa(i), Body: []byte(`{"n":` + strconv.Itoa(i) + `,"pad":"xxxxxxxx"}`)})
				switch {
				case err == nil:
					confirmed++
				case errors.Is(err, ErrNack):
					nacked++
				default:
					t.Fatalf("publish %d: %v", i, err)
				}
			}
			if nacked == 0 {
				t.Fatalf("every publish confirmed under a max-length policy: the queue dropped the oldest (no x-overflow: reject-publish)")
			}
			if n := vhostCount(t, admin, "fwd"); n != confirmed {
				t.Errorf("forward queue holds %d messages, %d were confirmed: confirmed events were dropped", n, confirmed)
			}
			if n := vhostCount(t, admin, "dlq"); n != 0 {
				t.Errorf("DLQ holds %d messages: the forward queue dead-lettered confirmed events for its length", n)
			}
			if err := p.Degraded(); err != nil {
				t.Errorf("Degraded = %v on a fresh topology", err)
			}
		})
	}
}

// TestPublisher_QueuesOfThePreviousReleaseAreKeptAndNamed: a broker whose
// forward queue, DLQ and events queue an earlier release declared (no
// x-overflow) refuses the current arguments with PRECONDITION_FAILED.
// The publisher keeps them, connects and publishes as before, and names
// them (Degraded: /readyz/webhook shows a warning, the gauge counts them)
// so the operator migrates them (docs/upgrading.md). Before the fallback,
// the same change would have made every session fail: 503 for good.
func TestPublisher_QueuesOfThePreviousReleaseAreKeptAndNamed(t *testing.T) {
	opts, _, admin := vhostOptions(t, topology.Quorum)
	top := *opts.Topology
	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q := amqp.Table{"x-queue-type": "quorum"}
	fwd := amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": top.DLXExchange, "x-dead-letter-routing-key": top.DLQ}
	for name, args := range map[string]amqp.Table{"fwd": fwd, "dlq": q, "events": q} {
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
	}
	ch.Close()
	p := newTestPublisher(t, opts)
	if err := p.Publish(context.Background(), Message{ID: "old-1", Body: []byte(`{}`)}); err != nil {
		t.Fatalf("publish over the previous release's queues: %v", err)
	}
	var dg *DegradedError
	if err := p.Degraded(); !errors.As(err, &dg) || !strings.Contains(err.Error(), "fwd, events, dlq") {
		t.Fatalf("Degraded = %v, want the three queues named", err)
	}
	if got := p.unguardedCount(); got != 3 {
		t.Errorf("borda_webhook_queues_unguarded = %v, want 3", got)
	}
	if err := p.Ready(); err != nil {
		t.Errorf("Ready = %v: old queues must not take the ingress down", err)
	}
}

// forwardBound reports whether the vhost binds fwd to yzex.events.
func forwardBound(v *servicetest.Vhost, key string) bool {
	return slices.Contains(v.Bindings(), "yzex.events fwd "+key)
}

// TestPublisher_RemovedForwardBindingIsAssertedAgainWithoutConfigure
// (attack A48): the forward queue's binding removed by hand while the
// events queue's pattern still routes the event, so the broker confirms
// it into the events queue alone. The publisher's user has no configure
// permission (the full redeclare is refused). queue.bind needs only the
// write permission on the queue and the read permission on the exchange:
// the check asserts the binding every second, so it is back within the
// bound and every later publish reaches the forward queue. Before, it
// stayed missing for good (ACCESS_REFUSED every 5 s) and every 200 was
// lost.
func TestPublisher_RemovedForwardBindingIsAssertedAgainWithoutConfigure(t *testing.T) {
	opts, v, admin := vhostOptions(t, topology.Quorum)
	p := newTestPublisher(t, opts)
	v.SetPermissions("^$", ".*", ".*")
	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueUnbind("fwd", opts.RoutingKey, opts.Exchange, nil); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	brokertest.Eventually(t, queueCheckBound, "the forward binding asserted again", func() bool { return forwardBound(v, opts.RoutingKey) })
	before := vhostCount(t, admin, "fwd")
	for i := range 5 {
		if err := p.Publish(context.Background(), Message{ID: fmt.Sprint("rb-", i), Body: []byte(`{}`)}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if n := vhostCount(t, admin, "fwd"); n != before+5 {
		t.Errorf("forward queue holds %d, want %d", n, before+5)
	}
	if err := p.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
}

// TestPublisher_UnassertableForwardBindingIsRefused (attack A48, least
// privilege): a publisher that may neither declare nor bind (no read
// permission on the exchange) cannot put a removed binding back, nor
// know it is there: publishes that would reach the forward queue answer
// ErrForwardUnbound (503 FORWARD_UNBOUND) and Ready fails, instead of a
// 200 for an event the events queue alone takes. Once the permission is
// back the binding is asserted and publishing resumes.
func TestPublisher_UnassertableForwardBindingIsRefused(t *testing.T) {
	opts, v, admin := vhostOptions(t, topology.Quorum)
	p := newTestPublisher(t, opts)
	v.SetPermissions("^$", ".*", "^$")
	ch, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueUnbind("fwd", opts.RoutingKey, opts.Exchange, nil); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	unbound := time.Now()
	msg := Message{ID: "ub-1", Body: []byte(`{}`)}
	var perr error
	for perr = p.Publish(context.Background(), msg); !errors.Is(perr, ErrForwardUnbound); perr = p.Publish(context.Background(), msg) {
		if perr != nil {
			t.Fatalf("publish after the unbind: %v, want nil or ErrForwardUnbound", perr)
		}
		if time.Since(unbound) > queueCheckBound {
			t.Fatalf("publishes still confirmed %s after the binding was removed", queueCheckBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Ready(); !errors.Is(err, ErrForwardUnbound) {
		t.Errorf("Ready = %v, want ErrForwardUnbound", err)
	}
	if got := value(t, p.metrics.unbound); got != 1 {
		t.Errorf("borda_webhook_forward_unbound = %v, want 1", got)
	}
	v.SetPermissions(".*", ".*", ".*")
	brokertest.WaitReady(t, p, queueCheckBound)
	if !forwardBound(v, opts.RoutingKey) {
		t.Error("ready again without the binding")
	}
	if err := p.Publish(context.Background(), msg); err != nil {
		t.Errorf("publish once the binding is back: %v", err)
	}
}
