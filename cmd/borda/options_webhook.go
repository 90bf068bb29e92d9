package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/gateway"
	"github.com/olp-edu/borda/webhook/ingress"
	"github.com/olp-edu/borda/webhook/publish"
	"github.com/olp-edu/borda/webhook/topology"
)

// The mapping of the validated configuration into the webhook packages'
// options (docs/architecture.md): webhook/topology, webhook/publish and
// webhook/ingress never read configs.

// What the gateway serves at the webhook paths.
var (
	_ gateway.Webhook = (*ingress.Ingress)(nil)
	_ gateway.Webhook = (*ingress.Unconfigured)(nil)
)

// flatSourceName names the source of the flat webhook section
// (webhook.path, WEBHOOK_TOKENS) in envelopes, logs and metrics.
const flatSourceName = configs.FlatSourceName

// webhookEnabled reports whether cfg configures any webhook source
// (webhook.path or webhook.sources); when it does not, the ingress is off.
func webhookEnabled(w configs.Webhook) bool { return w.Path != "" || len(w.Sources) > 0 }

// topologyOf names the broker objects of cfg (docs/forwarder.md): the
// events binding is forward.events_binding, else derived from
// webhook.routing_key (topology.EventsBindingFor).
func topologyOf(cfg configs.Config) topology.Topology {
	retry := make([]topology.Delay, len(cfg.Forward.RetryDelays))
	for i, d := range cfg.Forward.RetryDelays {
		retry[i] = topology.Delay{Name: d.Name, TTL: d.D}
	}
	return topology.Topology{
		Exchange:      cfg.Webhook.Exchange,
		RoutingKey:    cfg.Webhook.RoutingKey,
		ForwardQueue:  cfg.Forward.Queue,
		EventsQueue:   cfg.Forward.EventsQueue,
		EventsBinding: cfg.Forward.EventsBinding,
		DLQ:           cfg.Forward.DLQ,
		Retry:         retry,
		QueueType:     topology.QueueType(cfg.Webhook.QueueType),
		RetryExchange: topology.RetryExchange,
		DLXExchange:   topology.DLXExchange,
	}
}

// ingressPublisherOptions are the options of the ingress's publisher: the
// webhook exchange, the whole topology declared on every connection.
func ingressPublisherOptions(cfg configs.Config, logger *slog.Logger, reg prometheus.Registerer) publish.Options {
	top := topologyOf(cfg)
	w := cfg.Webhook
	return publish.Options{
		URL:            cfg.AMQP.URL.Reveal(),
		Exchange:       w.Exchange,
		RoutingKey:     w.RoutingKey,
		Topology:       &top,
		CheckQueue:     top.ForwardQueue,
		CheckBinding:   top.RoutingKey,
		Channels:       w.PublishChannels,
		MaxInFlight:    w.MaxInFlight,
		ConfirmTimeout: w.ConfirmTimeout.D(),
		Logger:         logger,
		Registerer:     reg,
	}
}

// ingressOptions maps the flat webhook section (source "whatsapp" when
// webhook.path is set) and webhook.sources. A source must be
// authenticated: by tokens (tokens_env, else WEBHOOK_TOKENS), by a
// signature, or both; one with neither is an error naming its field, so an
// ingress never accepts everything.
func ingressOptions(w configs.Webhook) (ingress.Options, error) {
	opts := ingress.Options{
		DedupSize:                w.DedupSize,
		DedupTTL:                 w.DedupTTL.D(),
		MaxBodyBytes:             w.MaxBodyBytes,
		UnauthenticatedBodyBytes: w.UnauthenticatedBodyBytes,
		BodyTimeout:              w.BodyTimeout.D(),
		AuthFailures: ingress.AuthFailures{
			PerIP: w.AuthFailures.PerIP, PerSource: w.AuthFailures.PerSource,
			MaxClients: w.AuthFailures.MaxClients, Window: w.AuthFailures.Window.D(),
		},
	}
	// Each envelope names its sender, the credential group computed here,
	// where the credentials' values are known (the forwarder may not
	// have them: fresh attack pass 11, A06).
	senders := w.CredentialGroups()
	// A source's configuration mistake is that source's: it goes in its
	// NotConfigured (it answers 503 NOT_CONFIGURED, the others are
	// served; attack B32). Messages name fields and variables, never a
	// value.
	if w.Path != "" {
		s := ingress.Source{Name: flatSourceName, Path: w.Path, RoutingKey: w.RoutingKey, Tokens: revealAll(w.Tokens), IDFields: w.IDFields, Sender: senders[flatSourceName]}
		if len(nonEmpty(s.Tokens)) == 0 {
			s.NotConfigured = errors.New("webhook.path: no token configured (set WEBHOOK_TOKENS); refusing to accept unauthenticated webhooks")
		}
		opts.Sources = append(opts.Sources, s)
	}
	for i, c := range w.Sources {
		field := fmt.Sprintf("webhook.sources[%d]", i)
		s := ingress.Source{Name: c.Name, Path: c.Path, RoutingKey: c.RoutingKey, IDFields: w.IDFields, RedactFields: c.RedactFields, Sender: senders[c.Name]}
		if s.RoutingKey == "" {
			s.RoutingKey = w.RoutingKey
		}
		if c.IDFields != nil {
			s.IDFields = c.IDFields
		}
		var errs []error
		switch {
		case c.TokensEnv != "":
			s.Tokens = revealAll(c.Tokens)
			if len(nonEmpty(s.Tokens)) == 0 {
				errs = append(errs, fmt.Errorf("%s.tokens_env: %s is empty or unset", field, c.TokensEnv))
			}
		case c.Signature == nil:
			s.Tokens = revealAll(w.Tokens)
			if len(nonEmpty(s.Tokens)) == 0 {
				errs = append(errs, fmt.Errorf("%s: no tokens_env, no signature and WEBHOOK_TOKENS unset; refusing to accept unauthenticated webhooks", field))
			}
		}
		if c.Signature != nil {
			s.Signature = &ingress.Signature{Scheme: c.Signature.Scheme, Secrets: revealAll(c.Signature.Secrets), Tolerance: c.Signature.Tolerance.D()}
			if len(s.Signature.Secrets) == 0 {
				errs = append(errs, fmt.Errorf("%s.signature (%s): no secret configured", field, strings.Join(secretVariables(c.Signature), ", ")))
			}
		}
		s.NotConfigured = errors.Join(errs...)
		opts.Sources = append(opts.Sources, s)
	}
	return opts, nil
}

// secretVariables names the variables a signature reads its secrets from.
func secretVariables(sig *configs.WebhookSignature) []string {
	var names []string
	if sig.SecretEnv != "" {
		names = append(names, sig.SecretEnv)
	}
	return append(names, sig.SecretEnvs...)
}

// newIngress builds the ingress of w on pub.
func newIngress(w configs.Webhook, pub ingress.MessagePublisher, logger *slog.Logger, reg prometheus.Registerer) (*ingress.Ingress, error) {
	opts, err := ingressOptions(w)
	if err != nil {
		return nil, err
	}
	for _, c := range w.Sources {
		if c.Signature == nil || len(c.Signature.Secrets) == 0 {
			continue // no secret at all: the source is NOT_CONFIGURED, logged by the ingress
		}
		for _, name := range c.Signature.Unset {
			logger.Warn("webhook signing secret variable unset or empty; the source verifies with its other secrets only",
				"source", c.Name, "variable", name)
		}
	}
	return ingress.New(opts, pub, logger, reg)
}

// webhookPaths are the path prefixes of every configured source, for the
// stand-in that answers 503 NOT_CONFIGURED.
func webhookPaths(w configs.Webhook) []string {
	var paths []string
	if w.Path != "" {
		paths = append(paths, w.Path)
	}
	for _, s := range w.Sources {
		paths = append(paths, s.Path)
	}
	return paths
}

func revealAll(ss configs.Secrets) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Reveal())
	}
	return out
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
