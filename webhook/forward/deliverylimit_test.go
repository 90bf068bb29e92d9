package forward

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/brokernode"
	"github.com/olp-edu/borda/internal/servicetest"
)

// rabbit4Limit is RabbitMQ 4's default delivery limit on quorum queues.
const rabbit4Limit = 20

// limitTopology puts RabbitMQ 4's default delivery limit on every queue of
// h's private topology (the queues share the prefix before "-fwd"), on the
// private node (the policy is node-wide state): h must have been built
// after servicetest.PrivateBroker(t).
func limitTopology(t *testing.T, node *brokernode.Node, h *harness) {
	t.Helper()
	servicetest.DeliveryLimitPolicy(t, node, strings.TrimSuffix(h.top.ForwardQueue, "-fwd"), rabbit4Limit)
}

// redisBehindProxy points the harness's Redis at an OutageProxy.
func redisBehindProxy(t *testing.T) (*servicetest.OutageProxy, func(*harnessConfig)) {
	u, err := url.Parse(servicetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := servicetest.NewOutageProxy(t, u.Host)
	u.Host = p.Addr()
	return p, func(c *harnessConfig) { c.RedisURL = u.String() }
}

// TestForward_TwoMinuteRedisOutageUnderADeliveryLimitLosesNothing: with
// Redis down the forwarder used to nack-requeue every event about once a
// second; under RabbitMQ 4's delivery limit of 20 each waiting event was
// dead-lettered after ~20 s, though the runbook promises the forward queue
// merely grows. The outage lasts two minutes (six times the limit's worth
// of old requeues); afterwards every event is delivered exactly once,
// nothing is in the DLQ, and readiness named Redis meanwhile.
func TestForward_TwoMinuteRedisOutageUnderADeliveryLimitLosesNothing(t *testing.T) {
	t.Parallel()
	node := servicetest.PrivateBroker(t)
	proxy, viaProxy := redisBehindProxy(t)
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, viaProxy)
	limitTopology(t, node, h)
	f := h.start(nil)

	const before, during = 5, 40
	for i := range before {
		h.publish(jsonEnvelope(fmt.Sprintf("up-%02d", i), `{}`))
	}
	eventually(t, 10*time.Second, "the first events delivered", func() bool { return len(end.delivered()) == before })
	eventually(t, 5*time.Second, "ready while everything is up", func() bool { return len(f.Readiness()) == 0 })

	proxy.SetDown(true)
	for i := range during {
		h.publish(jsonEnvelope(fmt.Sprintf("out-%02d", i), `{}`))
	}
	eventually(t, 15*time.Second, "readiness to name Redis", func() bool {
		r := f.Readiness()
		return len(r) > 0 && strings.HasPrefix(r[0], "redis:")
	})
	outageEnds := time.Now().Add(2 * time.Minute)
	for time.Now().Before(outageEnds) {
		if d := h.depth(h.top.DLQ); d != 0 {
			t.Fatalf("DLQ depth %d during the Redis outage, want 0 (events must wait in the forward queue)", d)
		}
		time.Sleep(time.Second)
	}
	if got := h.depth(h.top.ForwardQueue); got != during {
		t.Errorf("forward queue depth at the end of the outage = %d, want %d", got, during)
	}
	// The consumer did take deliveries while Redis was down (and put them
	// back): the outage was met, not merely waited out.
	if n := value(f.m.outcomes.WithLabelValues("requeued", "store_error")); n < 1 {
		t.Errorf("requeued{store_error} = %v during the outage, want ≥ 1 (no delivery reached the forwarder)", n)
	}
	proxy.SetDown(false)

	eventually(t, 30*time.Second, "every event delivered after Redis came back", func() bool {
		return len(end.delivered()) == before+during
	})
	// Settled: every event has its final outcome and the queue is empty,
	// so no second POST of any of them can still come.
	eventually(t, 10*time.Second, "every event settled", func() bool {
		return outcomeTotal(t, f, "delivered") >= before+during && h.depth(h.top.ForwardQueue) == 0
	})
	for id, c := range end.delivered() {
		if c != 1 {
			t.Errorf("%s delivered %d times, want exactly once", id, c)
		}
	}
	if d := h.depth(h.top.DLQ); d != 0 {
		t.Errorf("DLQ depth %d after the outage, want 0", d)
	}
	eventually(t, 5*time.Second, "ready again", func() bool { return len(f.Readiness()) == 0 })
}
