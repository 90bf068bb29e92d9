package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/publish"
)

func TestEventsBinding_DerivedFromTheRoutingKey(t *testing.T) {
	for _, c := range []struct{ rk, override, want string }{
		{"yzex.events.connect.whatsapp.legacy_forward", "", "yzex.events.connect.whatsapp.#"},
		{"olp-dev.alice.connect.whatsapp.legacy_forward", "", "olp-dev.alice.connect.whatsapp.#"},
		{"alice", "", "#"},
		{"alice.fwd", "alice.connect.*", "alice.connect.*"},
	} {
		cfg := configs.Default()
		cfg.Webhook.RoutingKey, cfg.Forward.EventsBinding = c.rk, c.override
		if got := topologyOf(cfg).EffectiveEventsBinding(); got != c.want {
			t.Errorf("routing key %q, events_binding %q: binding %q, want %q", c.rk, c.override, got, c.want)
		}
	}
}

// TestPrivateInstanceEventsQueueGetsItsEvents: the documented private
// instance (its own exchange, webhook.routing_key and queues) had an
// events queue bound to the fixed yzex.events.connect.whatsapp.#, so
// `borda consume-events` of that instance never saw an event. Published
// as the ingress does, an event now reaches both the forward queue and the
// events queue.
func TestPrivateInstanceEventsQueueGetsItsEvents(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	name := servicetest.Name(t)
	cfg := configs.Default()
	cfg.Webhook.Exchange = name + ".events"
	cfg.Webhook.RoutingKey = name + ".connect.whatsapp.legacy_forward"
	cfg.Forward.Queue, cfg.Forward.DLQ, cfg.Forward.EventsQueue = name+"-fwd", name+"-dlq", name+"-events"
	cfg.Forward.RetryDelays = []configs.Delay{{Name: "1m", D: time.Minute}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	top := topologyOf(cfg)
	top.RetryExchange, top.DLXExchange = name+"-retry", name+"-dlx"
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	if err := top.Declare(ch); err != nil {
		t.Fatal(err)
	}
	servicetest.DeleteAtCleanup(t, conn,
		[]string{top.ForwardQueue, top.EventsQueue, top.DLQ, top.RetryQueue(0)},
		[]string{top.Exchange, top.RetryExchange, top.DLXExchange})
	if err := ch.PublishWithContext(context.Background(), top.Exchange, top.RoutingKey, true, false,
		amqp.Publishing{MessageId: name, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{top.ForwardQueue, top.EventsQueue} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			d, ok, err := ch.Get(q, true)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				if d.MessageId != name {
					t.Errorf("%s: message %q, want %q", q, d.MessageId, name)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s got no event within 5 s", q)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// The flat section and webhook.sources map to ingress sources; a source
// with no credential is refused with its field and the variable to set.
func TestIngressOptionsMapSourcesAndRefuseOnesWithoutCredential(t *testing.T) {
	cfg := configs.Default()
	cfg.Webhook.Path = "/webhooks/whatsapp"
	cfg.Webhook.Tokens = configs.Secrets{"tok"}
	cfg.Webhook.Sources = []configs.WebhookSource{
		{Name: "zap", Path: "/webhooks/zap"}, // WEBHOOK_TOKENS, the flat routing key
		{Name: "gh", Path: "/hooks/github", RoutingKey: "gh.key", Signature: &configs.WebhookSignature{
			Scheme: "github", SecretEnv: "GH", Secrets: configs.Secrets{"s"}, Tolerance: configs.Duration(time.Minute)}},
	}
	opts, err := ingressOptions(cfg.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Sources) != 3 {
		t.Fatalf("sources = %+v", opts.Sources)
	}
	flat, zap, gh := opts.Sources[0], opts.Sources[1], opts.Sources[2]
	if flat.Name != flatSourceName || flat.RoutingKey != cfg.Webhook.RoutingKey || len(flat.Tokens) != 1 {
		t.Errorf("flat source = %+v", flat)
	}
	if zap.RoutingKey != cfg.Webhook.RoutingKey || len(zap.Tokens) != 1 || len(zap.IDFields) != 3 {
		t.Errorf("zap source = %+v, want the flat tokens, routing key and id fields", zap)
	}
	if gh.RoutingKey != "gh.key" || len(gh.Tokens) != 0 || gh.Signature == nil || gh.Signature.Tolerance != time.Minute {
		t.Errorf("signed source = %+v", gh)
	}
	if got := webhookPaths(cfg.Webhook); len(got) != 3 || got[0] != "/webhooks/whatsapp" || got[2] != "/hooks/github" {
		t.Errorf("paths = %v", got)
	}

	// A source's mistake is that source's (attack B32): it is mapped with
	// NotConfigured naming the field, the others as they are.
	cfg.Webhook.Tokens = nil
	opts, err = ingressOptions(cfg.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range []string{"webhook.path: no token configured (set WEBHOOK_TOKENS)", "webhook.sources[0]: no tokens_env, no signature and WEBHOOK_TOKENS unset"} {
		if e := opts.Sources[n].NotConfigured; e == nil || !strings.Contains(e.Error(), want) {
			t.Errorf("without WEBHOOK_TOKENS: source %d: %v, want %q", n, e, want)
		}
	}
	if e := opts.Sources[2].NotConfigured; e != nil {
		t.Errorf("signed source: %v, want it served", e)
	}
	cfg.Webhook.Sources[1].TokensEnv = "GH_TOKENS"
	opts, _ = ingressOptions(cfg.Webhook)
	if e := opts.Sources[2].NotConfigured; e == nil || !strings.Contains(e.Error(), "webhook.sources[1].tokens_env: GH_TOKENS is empty or unset") {
		t.Errorf("empty tokens_env: %v", e)
	}
}

// TestOneSourceWithAnUnsetSecretLeavesTheOthersServed (attack B32): the
// real mapping and the real ingress: a signed source whose secret
// variable is unset answers 503 NOT_CONFIGURED, the token source 200.
func TestOneSourceWithAnUnsetSecretLeavesTheOthersServed(t *testing.T) {
	cfg := configs.Default()
	cfg.Webhook.Path = "/webhooks/whatsapp"
	cfg.Webhook.Tokens = configs.Secrets{"tok"}
	cfg.Webhook.Sources = []configs.WebhookSource{
		{Name: "gh", Path: "/hooks/github", Signature: &configs.WebhookSignature{Scheme: "github", SecretEnv: "GH_UNSET", Unset: []string{"GH_UNSET"}}},
		{Name: "std", Path: "/hooks/std", Signature: &configs.WebhookSignature{Scheme: "standard", SecretEnv: "STD", Secrets: configs.Secrets{"whsec_%%%"}}},
	}
	in, err := newIngress(cfg.Webhook, okPublisher{}, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		code int
	}{{"/hooks/github", 503}, {"/hooks/std", 503}, {"/webhooks/whatsapp", 200}} {
		r := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(`{"a":1}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		in.ServeHTTP(w, r)
		if w.Code != c.code || (c.code == 503 && !strings.Contains(w.Body.String(), "NOT_CONFIGURED")) {
			t.Errorf("%s: %d %s, want %d", c.path, w.Code, w.Body.String(), c.code)
		}
	}
}

type okPublisher struct{}

func (okPublisher) Publish(context.Context, publish.Message) error { return nil }

// TestSoleSourceHonoursLegacyKeysOnlyWithOneSource: the forwarder honours
// the source-less idempotency keys of earlier versions only when one
// source is configured (each such key can only be one of its events).
func TestSoleSourceHonoursLegacyKeysOnlyWithOneSource(t *testing.T) {
	flat := configs.Webhook{Path: "/webhook/whatsapp"}
	one := configs.Webhook{Sources: []configs.WebhookSource{{Name: "zapster"}}}
	two := configs.Webhook{Path: "/webhook/whatsapp", Sources: []configs.WebhookSource{{Name: "zapster"}}}
	for _, tt := range []struct {
		w    configs.Webhook
		want string
	}{{flat, "whatsapp"}, {one, "zapster"}, {two, ""}, {configs.Webhook{}, ""}} {
		if got := soleSource(tt.w); got != tt.want {
			t.Errorf("soleSource(%+v) = %q, want %q", tt.w, got, tt.want)
		}
	}
}

// TestQueueWarningNamesAnUnconsumedEventsQueue: the operator page warns
// when the events queue holds messages and nothing consumes it (19 747
// messages went unnoticed in a trial), and only then.
func TestQueueWarningNamesAnUnconsumedEventsQueue(t *testing.T) {
	if w := queueWarning(eventsRole, amqp.Queue{Messages: 19747}); !strings.Contains(w, "19747") || !strings.Contains(w, "no consumer") {
		t.Errorf("warning %q", w)
	}
	for _, q := range []struct {
		role string
		q    amqp.Queue
	}{{eventsRole, amqp.Queue{Messages: 5, Consumers: 1}}, {eventsRole, amqp.Queue{}}, {"forward", amqp.Queue{Messages: 9}}} {
		if w := queueWarning(q.role, q.q); w != "" {
			t.Errorf("queueWarning(%q, %+v) = %q, want none", q.role, q.q, w)
		}
	}
}
