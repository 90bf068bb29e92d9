package main

import (
	"context"
	"fmt"
	"time"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/webhook/forward"
	"github.com/olp-edu/borda/webhook/publish"
)

// The mapping of the validated configuration into `borda forward`'s and
// `borda dlq`'s options (docs/architecture.md): webhook/forward and
// webhook/deadletter never read configs.

// forwardOptions maps cfg.Forward; Redis, Keys, Logger and Registerer are
// the caller's.
func forwardOptions(cfg configs.Config) forward.Options {
	f := cfg.Forward
	secret := f.HMACSecret.Reveal()
	scrub := append(redact.URLSecrets(f.URL), secret)
	return forward.Options{
		URL:               f.URL,
		HMACSecret:        []byte(secret),
		SignatureVersions: f.SignatureVersions,
		Scrub:             func(text string) string { return redact.Secrets(text, scrub) },
		Prefetch:          f.Prefetch,
		Timeout:           f.Timeout.D(),
		LeaseTTL:          f.LeaseTTL.D(),
		RetentionTTL:      f.RetentionTTL.D(),
		Breaker:           forward.BreakerOptions{Failures: f.Breaker.Failures, OpenFor: f.Breaker.OpenFor.D()},
		Topology:          topologyOf(cfg),
		AMQPURL:           cfg.AMQP.URL.Reveal(),
		LegacySource:      soleSource(cfg.Webhook),
		BareKeySource:     bareKeySource(cfg.Webhook),
		Sources:           sourceNames(cfg.Webhook),
		Senders:           cfg.Webhook.CredentialGroups(),
	}
}

// soleSource is the name of the only webhook source configured ("" when
// there are none or several): the source-less idempotency keys of earlier
// versions are honoured for its events only (docs/forwarder.md,
// "Idempotency keys").
func soleSource(w configs.Webhook) string {
	switch {
	case w.Path != "" && len(w.Sources) == 0:
		return "whatsapp" // the flat section's source name
	case w.Path == "" && len(w.Sources) == 1:
		return w.Sources[0].Name
	}
	return ""
}

// bareKeySource is the source whose legacy POSTs keep the bare event id
// as Idempotency-Key: the flat section's (also for a forward-only config
// that names no source), else the only source.
func bareKeySource(w configs.Webhook) string {
	if w.Path != "" || len(w.Sources) == 0 {
		return flatSourceName
	}
	return soleSource(w)
}

// sourceNames are the names of w's sources, the flat section's included.
func sourceNames(w configs.Webhook) []string {
	var out []string
	if w.Path != "" {
		out = append(out, flatSourceName)
	}
	for _, s := range w.Sources {
		out = append(out, s.Name)
	}
	return out
}

// dlqConfirmTimeout bounds each put-back's and replay's confirm.
const dlqConfirmTimeout = 5 * time.Second

// startDLQPublisher starts the publisher `borda dlq` puts back and
// replays through, and waits (at most 10 s) until it is connected. The
// caller stops it with stopDLQPublisher.
func startDLQPublisher(ctx context.Context, cfg configs.Config) (*publish.Publisher, error) {
	pub, err := publish.New(publish.Options{
		URL:            cfg.AMQP.URL.Reveal(),
		ConnectionName: "borda-dlq",
		Channels:       1,
		MaxInFlight:    64,
		ConfirmTimeout: dlqConfirmTimeout,
	})
	if err != nil {
		return nil, err
	}
	if err := pub.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pub.WaitReady(wctx); err != nil {
		_ = pub.Stop(context.Background())
		return nil, fmt.Errorf("connecting to the broker: %w", err)
	}
	return pub, nil
}

// stopDLQPublisher waits for the outstanding confirms (at most one
// confirm timeout) and closes the connection.
func stopDLQPublisher(pub *publish.Publisher) {
	ctx, cancel := context.WithTimeout(context.Background(), dlqConfirmTimeout)
	defer cancel()
	_ = pub.Stop(ctx)
}
