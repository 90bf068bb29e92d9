package configs

import (
	"fmt"
	"strings"
)

// Webhook configures the WhatsApp webhook ingress (docs/webhooks.md). The flat
// fields describe one source; Sources adds more, each with its own path,
// credentials, id fields and routing key.
type Webhook struct {
	// Path is the ingress path; sub-paths reach the same ingress (the last
	// segment names the event). Empty: ingress off.
	Path string `yaml:"path"`
	// Exchange is the topic exchange events are published to
	// (default yzex.events).
	Exchange string `yaml:"exchange"`
	// RoutingKey of published events (default
	// yzex.events.connect.whatsapp.legacy_forward).
	RoutingKey string `yaml:"routing_key"`
	// ConfirmTimeout bounds the wait for the broker's confirm (default 3s);
	// passing it answers 503 CONFIRM_TIMEOUT.
	ConfirmTimeout Duration `yaml:"confirm_timeout"`
	// MaxBodyBytes caps the request body in bytes (default 10485760);
	// beyond it: 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// UnauthenticatedBodyBytes bounds, across all requests, the bytes
	// that bodies of signature-only sources hold in memory before their
	// signature is checked (default 67108864, 64 MiB; a body is charged
	// as it arrives). A delivery that would pass it first takes back the
	// bytes of the slowest bodies arriving for a second or more (each
	// answered 408 BODY_RECLAIMED); still past it, it is answered 503
	// BODY_BUDGET_EXHAUSTED with Retry-After: 1 and the connection closed
	// (providers retry). Token sources' bodies are charged to a budget of
	// their own of the same size.
	UnauthenticatedBodyBytes int64 `yaml:"unauthenticated_body_bytes"`
	// BodyTimeout bounds reading one request body (default 30s). A body
	// that trickles in slower answers 408 REQUEST_TIMEOUT (providers retry
	// it) and the connection is closed, so a slow client cannot hold a
	// request and its buffer open for ever.
	BodyTimeout Duration `yaml:"body_timeout"`
	// QueueType is the type of the forward queue and the DLQ: quorum
	// (default) or classic.
	QueueType string `yaml:"queue_type"`
	// DedupSize is the number of event ids remembered (default 20000).
	DedupSize int `yaml:"dedup_size"`
	// DedupTTL is how long an event id is remembered (default 30m).
	DedupTTL Duration `yaml:"dedup_ttl"`
	// PublishChannels is the number of confirm-mode channels on the one
	// publishing connection (default 4). Publishes go to the first open
	// one; the others stand by, so a channel the broker closes fails over
	// at once.
	PublishChannels int `yaml:"publish_channels"`
	// MaxInFlight caps unconfirmed publishes across all channels (default
	// 1024); beyond it requests answer 503.
	MaxInFlight int `yaml:"max_in_flight"`
	// IDFields are the body fields (dotted paths) whose values, joined,
	// identify an event when no delivery-id header is present (default:
	// Evolution's instance, event, data.key.id).
	IDFields []string `yaml:"id_fields"`
	// AuthFailures throttles refused credentials per client IP and per
	// source (docs/webhooks.md §2): past the limit, failures answer 429
	// AUTH_THROTTLED with Retry-After instead of 401. Valid credentials are
	// never throttled. Counters are per process.
	AuthFailures WebhookAuthFailures `yaml:"auth_failures"`
	// Sources are further ingress sources.
	Sources []WebhookSource `yaml:"sources"`

	// Tokens are the accepted credentials (WEBHOOK_TOKENS, comma-separated;
	// several for rotation).
	Tokens Secrets `yaml:"-"`
}

// WebhookAuthFailures is the failed-authentication throttle of the
// ingress: a leaky bucket per (source, client IP) and one per source,
// each allowing Limit failures at once and then one every Window/Limit.
type WebhookAuthFailures struct {
	// PerIP is the failures one client IP (IPv6: its ipv6_prefix_len
	// prefix, as rate limits) may have per source within Window before its
	// failures answer 429 (default 20).
	PerIP int `yaml:"per_ip"`
	// PerSource is the failures all clients together may have on one
	// source within Window before failures answer 429 (default 600): it
	// bounds a guess spread over many addresses.
	PerSource int `yaml:"per_source"`
	// Window is the period the limits count over (default 1m).
	Window Duration `yaml:"window"`
	// MaxClients bounds the client IPs remembered (default 10000; least
	// recently failing forgotten first), so a spray of addresses costs
	// fixed memory.
	MaxClients int `yaml:"max_clients"`
}

// WebhookSource is one provider's ingress.
type WebhookSource struct {
	// Name identifies the source in the envelope, logs and metrics.
	Name string `yaml:"name"`
	// Path is the source's ingress path (sub-paths included).
	Path string `yaml:"path"`
	// RoutingKey overrides webhook.routing_key for this source.
	RoutingKey string `yaml:"routing_key"`
	// TokensEnv names the environment variable with this source's tokens
	// (comma-separated). Empty: webhook.tokens (WEBHOOK_TOKENS), unless
	// the source has a Signature, which then authenticates it alone.
	TokensEnv string `yaml:"tokens_env"`
	// Signature, when set, verifies an HMAC signature over the raw body.
	Signature *WebhookSignature `yaml:"signature"`
	// IDFields override webhook.id_fields for this source.
	IDFields []string `yaml:"id_fields"`
	// RedactFields are top-level body fields removed before publishing
	// (opt-in; the envelope records it and the original's SHA-256). Only
	// JSON bodies are redacted; every other byte is kept.
	RedactFields []string `yaml:"redact_fields"`

	// Tokens are read from TokensEnv.
	Tokens Secrets `yaml:"-"`
}

// WebhookSignature configures signature verification for a source.
type WebhookSignature struct {
	// Scheme is github (X-Hub-Signature-256), stripe (t=…,v1=…) or
	// standard (Standard Webhooks).
	Scheme string `yaml:"scheme"`
	// SecretEnv names the environment variable holding the secret. For
	// github the whole value is one secret (a GitHub secret is free text
	// and may hold a comma); for stripe and standard, whose secrets
	// ("whsec_" + base64 or letters and digits) never hold one, a comma
	// still separates secrets for rotation, as it always did.
	SecretEnv string `yaml:"secret_env"`
	// SecretEnvs name more variables, each holding one whole secret (no
	// splitting), accepted alongside SecretEnv's during a rotation
	// (docs/webhooks.md, "Signed sources").
	SecretEnvs []string `yaml:"secret_envs"`
	// Tolerance is the accepted timestamp skew (default 5m).
	Tolerance Duration `yaml:"tolerance"`

	// Secrets are read from SecretEnv.
	Secrets Secrets `yaml:"-"`
	// Unset names the variables of SecretEnv and SecretEnvs that are
	// unset or empty (names only, never a value): `config check` reports
	// each and the gateway warns about each at start (attack B47).
	Unset []string `yaml:"-"`
}

func defaultWebhook() Webhook {
	return Webhook{
		Exchange:                 "yzex.events",
		RoutingKey:               "yzex.events.connect.whatsapp.legacy_forward",
		ConfirmTimeout:           Duration(3e9),
		MaxBodyBytes:             10 << 20,
		UnauthenticatedBodyBytes: 64 << 20,
		BodyTimeout:              Duration(30e9),
		QueueType:                "quorum",
		DedupSize:                20000,
		DedupTTL:                 Duration(30 * 60e9),
		PublishChannels:          4,
		MaxInFlight:              1024,
		IDFields:                 []string{"instance", "event", "data.key.id"},
		AuthFailures:             WebhookAuthFailures{PerIP: 20, PerSource: 600, Window: Duration(60e9), MaxClients: 10000},
	}
}

// validateWebhook checks the webhook section: the flat source and the
// broker (validateWebhookFlat), the failed-authentication throttle, then
// each of webhook.sources (validateWebhookSource).
func (c *Config) validateWebhook(p *problems, lookup func(string) (string, bool)) {
	w := &c.Webhook
	validateWebhookFlat(p, w)
	validateAuthFailures(p, w.AuthFailures)
	validFields(p, "webhook.id_fields", w.IDFields)
	paths := map[string]bool{w.Path: w.Path != ""}
	names := map[string]bool{"whatsapp": w.Path != ""} // the flat section's source name
	for i := range w.Sources {
		s := &w.Sources[i]
		f := fmt.Sprintf("webhook.sources[%d]", i)
		checkName(p, f+".name", s.Name, names, `is used by another source (the flat webhook section is "whatsapp")`)
		if !strings.HasPrefix(s.Path, "/") || strings.HasSuffix(s.Path, "/") {
			p.addf(f+".path", "%q must start with / and not end with /", s.Path)
		} else if paths[s.Path] {
			p.addf(f+".path", "%q is used by another source", s.Path)
		}
		paths[s.Path] = true
		validateWebhookSource(p, f, s, w, lookup)
	}
}

// validateWebhookFlat checks the flat source's path, the broker names and
// the ingress's bounds (confirm and body timeouts, body sizes, dedup,
// publishing channels).
func validateWebhookFlat(p *problems, w *Webhook) {
	if w.Path != "" && (!strings.HasPrefix(w.Path, "/") || strings.HasSuffix(w.Path, "/")) {
		p.addf("webhook.path", "%q must start with / and not end with /", w.Path)
	}
	if w.Exchange == "" {
		p.addf("webhook.exchange", "is required")
	}
	if w.RoutingKey == "" {
		p.addf("webhook.routing_key", "is required")
	}
	if w.ConfirmTimeout <= 0 {
		p.addf("webhook.confirm_timeout", "must be positive")
	}
	if w.BodyTimeout <= 0 {
		p.addf("webhook.body_timeout", "must be positive")
	}
	if w.MaxBodyBytes < 1 {
		p.addf("webhook.max_body_bytes", "must be positive (bytes)")
	}
	if w.UnauthenticatedBodyBytes < w.MaxBodyBytes {
		p.addf("webhook.unauthenticated_body_bytes", "must be at least webhook.max_body_bytes (%d), got %d", w.MaxBodyBytes, w.UnauthenticatedBodyBytes)
	}
	if w.QueueType != "quorum" && w.QueueType != "classic" {
		p.addf("webhook.queue_type", "%q: want quorum or classic", w.QueueType)
	}
	if w.DedupSize < 1 {
		p.addf("webhook.dedup_size", "must be at least 1")
	}
	if w.DedupTTL <= 0 {
		p.addf("webhook.dedup_ttl", "must be positive")
	}
	if w.PublishChannels < 1 {
		p.addf("webhook.publish_channels", "must be at least 1")
	}
	if w.MaxInFlight < 1 {
		p.addf("webhook.max_in_flight", "must be at least 1")
	}
}

// validateAuthFailures checks webhook.auth_failures.
func validateAuthFailures(p *problems, af WebhookAuthFailures) {
	if af.PerIP < 1 {
		p.addf("webhook.auth_failures.per_ip", "must be at least 1 (failures per window)")
	}
	if af.PerSource < 1 {
		p.addf("webhook.auth_failures.per_source", "must be at least 1 (failures per window)")
	}
	if af.Window <= 0 {
		p.addf("webhook.auth_failures.window", "must be positive")
	}
	if af.MaxClients < 1 {
		p.addf("webhook.auth_failures.max_clients", "must be at least 1")
	}
}

// validateWebhookSource checks one of webhook.sources (field is its
// path, "webhook.sources[i]") past its name and path: its id and redact
// fields and its signature, fills what it inherits from the flat section
// (id_fields, routing_key), and reads its secrets through lookup (nil:
// not read).
func validateWebhookSource(p *problems, f string, s *WebhookSource, w *Webhook, lookup func(string) (string, bool)) {
	validFields(p, f+".id_fields", s.IDFields)
	// Inherited values, filled in (after the source's own are checked)
	// so that `config check` prints what the source uses; an empty
	// id_fields list is not inherited.
	if s.IDFields == nil {
		s.IDFields = append([]string{}, w.IDFields...)
	}
	if s.RoutingKey == "" {
		s.RoutingKey = w.RoutingKey
	}
	for j, r := range s.RedactFields {
		if r == "" || strings.Contains(r, ".") {
			p.addf(fmt.Sprintf("%s.redact_fields[%d]", f, j), "%q: want a top-level field name", r)
		}
	}
	if s.TokensEnv != "" && lookup != nil {
		if v, ok := lookup(s.TokensEnv); ok {
			s.Tokens = splitSecrets(v)
		}
	}
	if sig := s.Signature; sig != nil {
		validateSignature(p, f+".signature", sig, lookup)
	}
}

// validateSignature checks a source's signature section (field is its
// path) and reads its secrets through lookup (nil: not read).
func validateSignature(p *problems, field string, sig *WebhookSignature, lookup func(string) (string, bool)) {
	if sig.Scheme != "github" && sig.Scheme != "stripe" && sig.Scheme != "standard" {
		p.addf(field+".scheme", "%q: want github, stripe or standard", sig.Scheme)
	}
	if sig.Tolerance == 0 {
		sig.Tolerance = Duration(5 * 60e9)
	}
	if sig.SecretEnv == "" && len(sig.SecretEnvs) == 0 {
		p.addf(field+".secret_env", "is required (or secret_envs)")
	}
	for j, name := range sig.SecretEnvs {
		if name == "" {
			p.addf(fmt.Sprintf("%s.secret_envs[%d]", field, j), "must name an environment variable")
		}
	}
	if lookup != nil {
		sig.Secrets = signingSecrets(sig.Scheme, sig.SecretEnv, sig.SecretEnvs, lookup)
		sig.Unset = unsetVariables(append([]string{sig.SecretEnv}, sig.SecretEnvs...), lookup)
	}
}

// validFields checks dotted body paths ("data.key.id").
func validFields(p *problems, field string, fields []string) {
	for j, f := range fields {
		if f == "" || strings.HasPrefix(f, ".") || strings.HasSuffix(f, ".") || strings.Contains(f, "..") {
			p.addf(fmt.Sprintf("%s[%d]", field, j), "%q: want a dotted path such as data.key.id", f)
		}
	}
}
