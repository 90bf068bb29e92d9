package queueguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/brokernode"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/publish"
	"github.com/olp-edu/borda/webhook/topology"
)

// managementNode starts a private RabbitMQ node with the management
// plugin (policies are node-wide state: never on the shared broker).
func managementNode(t *testing.T) *brokernode.Node {
	t.Helper()
	if err := brokernode.Available(); err != nil {
		if servicetest.Required() {
			t.Fatal(err)
		}
		t.Skipf("%v; skipping (set BORDA_REQUIRE_SERVICES=1 to fail instead)", err)
	}
	dir, err := os.MkdirTemp("", "qguard-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n, err := brokernode.Start(ctx, brokernode.Options{Dir: dir, Name: fmt.Sprintf("qguard-%d", os.Getpid()),
		RemoveDir: true, Management: true})
	if err != nil {
		t.Fatalf("starting a private node with the management plugin: %v", err)
	}
	t.Cleanup(n.Stop)
	return n
}

// TestHostileDropHeadPolicyIsRefusedBeforeTheQueueDrops (the fresh attack:
// a policy {"max-length":N,"overflow":"drop-head"} on Borda's quorum
// forward queue; RabbitMQ gives a quorum queue's policy overflow
// precedence over x-overflow: reject-publish, so the broker confirms
// every publish and drops the oldest): with the guard the publisher is
// degraded, borda_webhook_queues_unguarded is 1, publishes are refused
// with ErrQueueMayDrop before the queue reaches its limit, and every
// confirmed event is still in the queue (none dead-lettered as maxlen).
func TestHostileDropHeadPolicyIsRefusedBeforeTheQueueDrops(t *testing.T) {
	n := managementNode(t)
	top := topology.Topology{
		Exchange: "yzex.events", RoutingKey: "yzex.events.connect.whatsapp.legacy_forward",
		ForwardQueue: "fwd", EventsQueue: "events", DLQ: "dlq",
		Retry:     []topology.Delay{{Name: "1m", TTL: time.Minute}},
		QueueType: topology.Quorum, RetryExchange: topology.RetryExchange, DLXExchange: topology.DLXExchange,
	}
	g, err := New(Options{
		ManagementURL: n.ManagementURL, Vhost: "/", Every: 200 * time.Millisecond,
		Queues: []Queue{
			{Name: "fwd", Routes: []Route{{Exchange: top.Exchange, Binding: top.RoutingKey}}},
			{Name: "events", Routes: []Route{{Exchange: top.Exchange, Binding: top.EffectiveEventsBinding()}}},
			{Name: "dlq", Routes: []Route{{Exchange: top.DLXExchange, Binding: top.DLQRoutingKey()}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p, err := publish.New(publish.Options{URL: n.URL, Exchange: top.Exchange, RoutingKey: top.RoutingKey, Topology: &top,
		CheckQueue: top.ForwardQueue, CheckBinding: top.RoutingKey, Channels: 1, MaxInFlight: 16,
		ConfirmTimeout: 5 * time.Second, Guard: g, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	g.Start(ctx) // the publisher is not ready before the guard read every queue
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := p.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	if err := n.SetPolicy("atk-maxlen", "^(fwd|dlq)$", `{"max-length":20,"overflow":"drop-head"}`); err != nil {
		t.Fatal(err)
	}
	// The policy reaches the API with the queue's next statistics
	// emission (5 s), the guard at its next read.
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(g.Unguarded(), []string{"dlq", "fwd"}) {
		if time.Now().After(deadline) {
			s, _ := g.Settings("fwd")
			t.Fatalf("Unguarded = %v after 30 s (fwd: %s)", g.Unguarded(), s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s, _ := g.Settings("fwd"); s.Overflow != DropHead || s.OverflowFrom != "policy" || s.MaxLength != 20 {
		t.Errorf("fwd settings %s, want drop-head from the policy, max-length 20", s)
	}
	var dg *publish.DegradedError
	if err := p.Degraded(); !errors.As(err, &dg) || !strings.Contains(err.Error(), "dlq, fwd") {
		t.Errorf("Degraded = %v, want the unguarded queues named", err)
	}
	if got := gauge(t, reg, "borda_webhook_queues_unguarded"); got != 2 {
		t.Errorf("borda_webhook_queues_unguarded = %v, want 2", got)
	}
	var confirmed []string
	var refusal error
	for i := range 40 {
		id := fmt.Sprintf("evt-%02d", i)
		err := p.Publish(ctx, publish.Message{ID: id, Body: []byte(`{"i":` + fmt.Sprint(i) + `}`), Timestamp: time.Now()})
		if err != nil {
			refusal = err
			break
		}
		confirmed = append(confirmed, id)
	}
	if !errors.Is(refusal, publish.ErrQueueMayDrop) {
		t.Fatalf("after %d confirmed: %v, want ErrQueueMayDrop before the queue drops", len(confirmed), refusal)
	}
	if len(confirmed) != 10 {
		t.Errorf("%d confirmed before the refusal, want 10 (max-length 20 minus the headroom of 10)", len(confirmed))
	}
	if got := drain(t, n.URL, "fwd"); !slices.Equal(got, confirmed) {
		t.Errorf("the forward queue holds %v, want every confirmed event %v", got, confirmed)
	}
	if got := drain(t, n.URL, "dlq"); len(got) != 0 {
		t.Errorf("the DLQ holds %v: the forward queue dropped (dead-lettered) a confirmed event", got)
	}
	if err := n.ClearPolicy("atk-maxlen"); err != nil {
		t.Fatal(err)
	}
}

// gauge returns the value of the registered gauge named name.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// drain gets every message of queue (acking it) and returns their ids
// in order.
func drain(t *testing.T, url, queue string) []string {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("basic.get %s: %v", queue, err)
		}
		if !ok {
			return ids
		}
		ids = append(ids, d.MessageId)
	}
}
