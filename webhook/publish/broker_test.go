package publish

import (
	"context"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/internal/brokertest"
)

// faultConfirmTimeout is the confirm timeout of the fault tests.
const faultConfirmTimeout = 2 * time.Second

// testOptions returns the options of a publisher on a topology no other
// test uses (brokertest.Topology, deleted in Cleanup), with the defaults
// of `borda serve` (4 channels, 1024 in flight) and a 2 s confirm timeout.
func testOptions(t testing.TB) Options {
	t.Helper()
	top := brokertest.Topology(t)
	return Options{
		URL:            servicetest.AMQPURL(t),
		Exchange:       top.Exchange,
		RoutingKey:     top.RoutingKey,
		Topology:       &top,
		Channels:       4,
		MaxInFlight:    1024,
		ConfirmTimeout: faultConfirmTimeout,
	}
}

// withProxy puts a fault proxy between the publisher and the broker.
func withProxy(t testing.TB, opts *Options) *toxiproxy.Proxy {
	t.Helper()
	p, u := brokertest.Proxy(t, opts.URL)
	opts.URL = u
	return p
}

// newTestPublisher starts a publisher and waits until it is ready; it is
// stopped in Cleanup.
func newTestPublisher(t testing.TB, opts Options) *Publisher {
	t.Helper()
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
	})
	brokertest.WaitReady(t, p, 10*time.Second)
	return p
}

// value reads a counter or gauge.
func value(t testing.TB, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
