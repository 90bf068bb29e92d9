package configs

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Forward configures `borda forward` (docs/forwarder.md).
type Forward struct {
	// Queue is the queue consumed (default
	// yzex-connect-whatsapp-legacy-forward-queue). Its retry queues are
	// named "<queue>-retry-<delay>"; its dead-letter queue is forward.dlq.
	// The retry and dead-letter exchanges, yzex.events.retry and
	// yzex.events.dlx, are fixed by the contract and shared: each instance
	// binds only its own queues to them, by queue name.
	Queue string `yaml:"queue"`
	// DLQ is the dead-letter queue (default
	// yzex-connect-whatsapp-legacy-forward-dlq).
	DLQ string `yaml:"dlq"`
	// Prefetch is the number of unacked deliveries per worker (default 20).
	Prefetch int `yaml:"prefetch"`
	// Timeout bounds one POST to the legacy endpoint (default 10s).
	Timeout Duration `yaml:"timeout"`
	// RetryDelays is the retry ladder (default 1m, 5m, 15m, 60m); after the
	// last rung a failure goes to the DLQ. Each delay keeps its text as
	// written, which names its retry queue ("<queue>-retry-60m").
	RetryDelays []Delay `yaml:"retry_delays"`
	// Breaker opens after Failures consecutive counted failures for
	// OpenFor (default 10, 30s); while open nothing is consumed. A 500-like
	// answer counts only once two sources' events failed in a row
	// (docs/forwarder.md, "What the breaker counts").
	Breaker Breaker `yaml:"breaker"`
	// LeaseTTL is the TTL of the "processing" idempotency key (default 3 ×
	// timeout); it must exceed Timeout.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// RetentionTTL is the TTL of the "forwarded" idempotency key (default 7
	// days).
	RetentionTTL Duration `yaml:"retention_ttl"`
	// URL is the legacy endpoint (LEGACY_WEBHOOK_URL).
	URL string `yaml:"url"`
	// HMACSecret signs each POST (LEGACY_WEBHOOK_HMAC_SECRET).
	HMACSecret Secret `yaml:"-"`
	// SignatureVersions are the signatures each POST carries (default
	// [v1, v2]): v1 is X-Webhook-Signature over timestamp and body, v2 is
	// X-Webhook-Signature-V2, which also covers Idempotency-Key and
	// Content-Type (docs/forwarder.md, "The POST"). Once every receiver
	// checks v2, list only v2 so a captured POST cannot be replayed under a
	// changed Idempotency-Key.
	SignatureVersions []string `yaml:"signature_versions"`
	// EventsQueue is the queue `borda consume-events` reads (default
	// yzex-connect-whatsapp-events-queue). "" declares and binds no events
	// queue: for a deployment that does not run `borda consume-events`,
	// each event is then written once (to the forward queue) instead of
	// twice, and `borda consume-events` refuses to start.
	EventsQueue string `yaml:"events_queue"`
	// EventsBinding is the topic pattern that binds EventsQueue to
	// webhook.exchange. Empty (default): derived from webhook.routing_key,
	// its last dot-separated word replaced by "#"
	// (yzex.events.connect.whatsapp.legacy_forward gives
	// yzex.events.connect.whatsapp.#), so a private instance with its own
	// routing key gets its own events. At most 255 bytes, no spaces.
	EventsBinding string `yaml:"events_binding"`
}

func defaultForward() Forward {
	return Forward{
		Queue:             "yzex-connect-whatsapp-legacy-forward-queue",
		DLQ:               "yzex-connect-whatsapp-legacy-forward-dlq",
		EventsQueue:       "yzex-connect-whatsapp-events-queue",
		Prefetch:          20,
		Timeout:           Duration(10e9),
		RetryDelays:       []Delay{{"1m", 60e9}, {"5m", 300e9}, {"15m", 900e9}, {"60m", 3600e9}},
		Breaker:           Breaker{Failures: 10, OpenFor: Duration(30e9)},
		RetentionTTL:      Duration(7 * 24 * 3600e9),
		SignatureVersions: []string{"v1", "v2"},
	}
}

func (c *Config) validateForward(p *problems) {
	f := &c.Forward
	if f.Queue == "" {
		p.addf("forward.queue", "is required")
	}
	if f.DLQ == "" {
		p.addf("forward.dlq", "is required")
	}
	if f.Prefetch < 1 {
		p.addf("forward.prefetch", "must be at least 1")
	}
	if f.Timeout <= 0 {
		p.addf("forward.timeout", "must be positive")
	}
	if len(f.RetryDelays) == 0 {
		p.addf("forward.retry_delays", "must list at least one delay")
	}
	seen := map[string]bool{}
	for i, d := range f.RetryDelays {
		if d.D <= 0 {
			p.addf(fmt.Sprintf("forward.retry_delays[%d]", i), "must be positive")
		}
		if seen[d.Name] {
			p.addf(fmt.Sprintf("forward.retry_delays[%d]", i), "%q is listed twice", d.Name)
		}
		seen[d.Name] = true
	}
	if f.LeaseTTL == 0 {
		f.LeaseTTL = 3 * f.Timeout
	}
	if f.LeaseTTL <= f.Timeout {
		p.addf("forward.lease_ttl", "%s must exceed forward.timeout (%s), else two redeliveries may both POST", f.LeaseTTL, f.Timeout)
	}
	if f.RetentionTTL <= 0 {
		p.addf("forward.retention_ttl", "must be positive")
	}
	if f.Breaker.Failures < 1 {
		p.addf("forward.breaker.failures", "must be at least 1")
	}
	if f.Breaker.OpenFor <= 0 {
		p.addf("forward.breaker.open_for", "must be positive")
	}
	if len(f.SignatureVersions) == 0 {
		p.addf("forward.signature_versions", "must list v1, v2 or both")
	}
	for i, v := range f.SignatureVersions {
		if v != "v1" && v != "v2" {
			p.addf(fmt.Sprintf("forward.signature_versions[%d]", i), "%q: want v1 or v2", v)
		}
	}
	if b := f.EventsBinding; b != "" && (len(b) > 255 || strings.ContainsAny(b, " \t\r\n")) {
		p.addf("forward.events_binding", "%q: want a topic pattern of at most 255 bytes without spaces", b)
	}
	if f.URL != "" {
		if u, err := url.Parse(f.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.addf("forward.url", "%s is not an absolute http(s) URL", showURL(f.URL))
		}
	}
}

// Delay is one rung of the retry ladder: its duration and its text as
// written in the file ("1m", "60m"), which names the rung's retry queue.
type Delay struct {
	Name string
	D    time.Duration
}

// UnmarshalYAML parses a Go duration string and keeps the text.
func (d *Delay) UnmarshalYAML(n *yaml.Node) error {
	var v Duration
	if err := v.UnmarshalYAML(n); err != nil {
		return err
	}
	*d = Delay{Name: n.Value, D: v.D()}
	return nil
}

// MarshalYAML writes the delay as written.
func (d Delay) MarshalYAML() (any, error) { return d.Name, nil }
