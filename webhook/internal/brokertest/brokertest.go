// Package brokertest holds what the webhook packages' broker tests share:
// a topology of their own, an admin connection that inspects and breaks
// the broker, a fault proxy, and waits on a publisher's readiness. Tests
// only; it skips (or fails under BORDA_REQUIRE_SERVICES=1) when RabbitMQ
// is down, through internal/servicetest.
package brokertest

import (
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/topology"
)

// Topology returns a classic topology with an exchange and queues no other
// test uses (one retry rung, "1m"), deleted in Cleanup. The retry and DLX
// exchanges are the shared names and are left alone.
func Topology(t testing.TB) topology.Topology {
	t.Helper()
	u := servicetest.AMQPURL(t)
	n := servicetest.Name(t)
	top := topology.Topology{
		Exchange:      n + ".events",
		RoutingKey:    "yzex.events.connect.whatsapp.legacy_forward",
		ForwardQueue:  n + "-fwd",
		EventsQueue:   n + "-events",
		EventsBinding: "yzex.events.connect.whatsapp.#",
		DLQ:           n + "-dlq",
		Retry:         []topology.Delay{{Name: "1m", TTL: time.Minute}},
		QueueType:     topology.Classic,
		RetryExchange: topology.RetryExchange,
		DLXExchange:   topology.DLXExchange,
	}
	t.Cleanup(func() { deleteTopology(t, u, &top) })
	return top
}

// deleteTopology deletes what top declared but the shared exchanges; top
// is read at cleanup, so a test may change its queue type first.
func deleteTopology(t testing.TB, u string, top *topology.Topology) {
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Logf("cleanup: dialing broker: %v", err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Logf("cleanup: opening channel: %v", err)
		return
	}
	queues := []string{top.ForwardQueue, top.EventsQueue, top.DLQ}
	for i := range top.Retry {
		queues = append(queues, top.RetryQueue(i))
	}
	for _, q := range queues {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			t.Logf("cleanup: deleting queue %s: %v", q, err)
			if ch, err = conn.Channel(); err != nil {
				return
			}
		}
	}
	if err := ch.ExchangeDelete(top.Exchange, false, false); err != nil {
		t.Logf("cleanup: deleting exchange %s: %v", top.Exchange, err)
	}
}

// Admin is a side connection tests use to inspect and break the broker,
// never through a fault proxy.
type Admin struct {
	t    testing.TB
	conn *amqp.Connection
}

// NewAdmin dials the broker; the connection is closed in Cleanup.
func NewAdmin(t testing.TB) *Admin {
	t.Helper()
	conn, err := amqp.Dial(servicetest.AMQPURL(t))
	if err != nil {
		t.Fatalf("dialing broker: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Admin{t: t, conn: conn}
}

// Channel opens a channel; the caller closes it.
func (a *Admin) Channel() *amqp.Channel {
	a.t.Helper()
	ch, err := a.conn.Channel()
	if err != nil {
		a.t.Fatalf("opening admin channel: %v", err)
	}
	return ch
}

// Count returns the number of ready messages in queue.
func (a *Admin) Count(queue string) int {
	a.t.Helper()
	ch := a.Channel()
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		a.t.Fatalf("inspecting queue %s: %v", queue, err)
	}
	return q.Messages
}

// Drain returns every message in queue, acked.
func (a *Admin) Drain(queue string) []amqp.Delivery {
	a.t.Helper()
	ch := a.Channel()
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			a.t.Fatalf("getting from %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// Proxy puts an in-process toxiproxy in front of the broker at amqpURL
// and returns it with the URL that goes through it.
func Proxy(t testing.TB, amqpURL string) (*toxiproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(srv, servicetest.Name(t), "127.0.0.1:0", u.Host)
	if err := proxy.Start(); err != nil {
		t.Fatalf("starting fault proxy: %v", err)
	}
	t.Cleanup(proxy.Stop)
	u.Host = proxy.Listen
	return proxy, u.String()
}

// Readier is a publisher's readiness.
type Readier interface{ Ready() error }

// WaitReady waits until p is ready, at most within (then it fails the
// test with the last error).
func WaitReady(t testing.TB, p Readier, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := p.Ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publisher not ready within %s: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitNotReady waits until p reports not ready, at most within.
func WaitNotReady(t testing.TB, p Readier, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for p.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("still ready %s into the stall", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Eventually polls cond every 20 ms until it holds, failing the test with
// what when it does not within d.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Rabbitmqctl runs rabbitmqctl, failing the test on an error; it skips the
// test when the broker or rabbitmqctl is missing (fails under
// BORDA_REQUIRE_SERVICES=1).
func Rabbitmqctl(t testing.TB, args ...string) string {
	t.Helper()
	servicetest.AMQPURL(t)
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		if servicetest.Required() {
			t.Fatalf("rabbitmqctl not found: %v", err)
		}
		t.Skip("rabbitmqctl not found")
	}
	out, err := servicetest.Rabbitmqctl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ConnectionPID finds the broker's pid of the connection named name
// (client-provided), waiting up to 10 s for it to appear.
func ConnectionPID(t testing.TB, name string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := Rabbitmqctl(t, "list_connections", "--no-table-headers", "pid", "client_properties")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"`+name+`"`) {
				return strings.Fields(line)[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no broker connection named %s:\n%s", name, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
