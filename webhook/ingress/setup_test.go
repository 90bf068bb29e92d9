package ingress

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/internal/brokertest"
	"github.com/olp-edu/borda/webhook/publish"
)

// The tests' options: `borda serve`'s defaults (docs/configuration.md),
// with the flat source "whatsapp" at /webhooks/whatsapp.

// flatSourceName names the flat source, as cmd/borda maps it.
const flatSourceName = "whatsapp"

// defaultRoutingKey is webhook.routing_key's default.
const defaultRoutingKey = "yzex.events.connect.whatsapp.legacy_forward"

// defaultIDFields are webhook.id_fields' default (Evolution's).
var defaultIDFields = []string{"instance", "event", "data.key.id"}

// defaultOptions are the ingress defaults with no source.
func defaultOptions() Options {
	return Options{
		DedupSize:                20000,
		DedupTTL:                 30 * time.Minute,
		MaxBodyBytes:             10 << 20,
		UnauthenticatedBodyBytes: 64 << 20,
		BodyTimeout:              30 * time.Second,
		AuthFailures:             AuthFailures{PerIP: 20, PerSource: 600, MaxClients: 10000, Window: time.Minute},
	}
}

// flatOptions are the defaults with the flat source accepting tokens.
func flatOptions(tokens ...string) Options {
	o := defaultOptions()
	o.Sources = []Source{{Name: flatSourceName, Path: "/webhooks/whatsapp", RoutingKey: defaultRoutingKey, Tokens: tokens, IDFields: defaultIDFields}}
	return o
}

// addSources adds further sources as webhook.sources maps them: one with
// neither tokens nor a signature takes the flat source's tokens, one with
// no IDFields the default ones, one with no RoutingKey the default one.
func (o *Options) addSources(srcs ...Source) {
	var flat []string
	for _, s := range o.Sources {
		if s.Name == flatSourceName {
			flat = s.Tokens
		}
	}
	for _, s := range srcs {
		if len(s.Tokens) == 0 && s.Signature == nil {
			s.Tokens = flat
		}
		if s.IDFields == nil {
			s.IDFields = defaultIDFields
		}
		if s.RoutingKey == "" {
			s.RoutingKey = defaultRoutingKey
		}
		o.Sources = append(o.Sources, s)
	}
}

// stackConfig is an ingress's and its publisher's options.
type stackConfig struct {
	Options
	Publisher publish.Options
}

// testConfig returns the options of an ingress (flat source, token
// "test-token") on a publisher with a topology no other test uses
// (brokertest.Topology, deleted in Cleanup) and a 2 s confirm timeout.
func testConfig(t testing.TB) stackConfig {
	t.Helper()
	top := brokertest.Topology(t)
	return stackConfig{
		Options: flatOptions("test-token"),
		Publisher: publish.Options{
			URL:            servicetest.AMQPURL(t),
			Exchange:       top.Exchange,
			RoutingKey:     top.RoutingKey, // defaultRoutingKey
			Topology:       &top,
			Channels:       4,
			MaxInFlight:    1024,
			ConfirmTimeout: 2 * time.Second,
		},
	}
}

// newTestPublisher starts a publisher and waits until it is ready; it is
// stopped in Cleanup.
func newTestPublisher(t testing.TB, cfg stackConfig) *publish.Publisher {
	t.Helper()
	opts := cfg.Publisher
	opts.Logger = discardLogger()
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	p, err := publish.New(opts)
	if err != nil {
		t.Fatalf("publish.New: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
	})
	waitReady(t, p, 10*time.Second)
	return p
}

func waitReady(t testing.TB, p *publish.Publisher, within time.Duration) {
	t.Helper()
	brokertest.WaitReady(t, p, within)
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
