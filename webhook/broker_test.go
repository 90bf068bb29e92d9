package webhook

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/topology"
)

// testConfig returns a config with an exchange and queues no other test
// uses, deleted in Cleanup. The retry and DLX exchanges are shared names
// and are left alone.
func testConfig(t testing.TB) configs.Config {
	t.Helper()
	url := servicetest.AMQPURL(t)
	n := servicetest.Name(t)
	cfg := configs.Default()
	cfg.AMQP.URL = configs.Secret(url)
	cfg.Webhook.Path = "/webhooks/whatsapp"
	cfg.Webhook.Exchange = n + ".events"
	cfg.Webhook.QueueType = "classic"
	cfg.Webhook.ConfirmTimeout = configs.Duration(2 * time.Second)
	cfg.Webhook.Tokens = configs.Secrets{"test-token"}
	cfg.Forward.Queue = n + "-fwd"
	cfg.Forward.EventsQueue = n + "-events"
	cfg.Forward.DLQ = n + "-dlq"
	cfg.Forward.RetryDelays = []configs.Delay{{Name: "1m", D: time.Minute}}
	t.Cleanup(func() { deleteTopology(t, url, topology.FromConfig(cfg)) })
	return cfg
}

func deleteTopology(t testing.TB, url string, topo topology.Topology) {
	conn, err := amqp.Dial(url)
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
	queues := []string{topo.ForwardQueue, topo.EventsQueue, topo.DLQ}
	for i := range topo.Retry {
		queues = append(queues, topo.RetryQueue(i))
	}
	for _, q := range queues {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			t.Logf("cleanup: deleting queue %s: %v", q, err)
			if ch, err = conn.Channel(); err != nil {
				return
			}
		}
	}
	if err := ch.ExchangeDelete(topo.Exchange, false, false); err != nil {
		t.Logf("cleanup: deleting exchange %s: %v", topo.Exchange, err)
	}
}

// admin is a side connection tests use to inspect and break the broker.
type admin struct {
	t    testing.TB
	conn *amqp.Connection
}

func newAdmin(t testing.TB, cfg configs.Config) *admin {
	t.Helper()
	conn, err := amqp.Dial(servicetest.AMQPURL(t)) // never through a fault proxy
	if err != nil {
		t.Fatalf("dialing broker: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &admin{t: t, conn: conn}
}

func (a *admin) channel() *amqp.Channel {
	a.t.Helper()
	ch, err := a.conn.Channel()
	if err != nil {
		a.t.Fatalf("opening admin channel: %v", err)
	}
	return ch
}

// count returns the number of ready messages in queue.
func (a *admin) count(queue string) int {
	a.t.Helper()
	ch := a.channel()
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		a.t.Fatalf("inspecting queue %s: %v", queue, err)
	}
	return q.Messages
}

// drain returns every message in queue, acked.
func (a *admin) drain(queue string) []amqp.Delivery {
	a.t.Helper()
	ch := a.channel()
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

// newTestPublisher starts a publisher and waits until it is ready.
func newTestPublisher(t testing.TB, cfg configs.Config, opts ...PublisherOption) *Publisher {
	t.Helper()
	p, err := NewPublisher(cfg, discardLogger(), prometheus.NewRegistry(), opts...)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	waitReady(t, p, 10*time.Second)
	return p
}

func waitReady(t testing.TB, p *Publisher, within time.Duration) {
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

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
