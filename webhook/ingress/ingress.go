// Package ingress is Borda's webhook ingress (docs/webhooks.md): an
// http.Handler that authenticates a provider's delivery, applies the
// guardrails, dedups it by event id and answers 200 only once the
// publisher (webhook/publish) reports that RabbitMQ durably took the
// event (publisher confirm, no return).
//
// Checks run in the contract's order: 405 → 401 (429 AUTH_THROTTLED once
// a client's failures pass webhook.auth_failures) → 415 → 413 → 400 →
// 429/200 dedup → publish → 503 or 200. See docs/webhooks.md.
package ingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/webhook/publish"
)

// Response statuses: the body is {"status":"<status>"} (plus "reason" on
// 503).
const (
	StatusMethodNotAllowed     = "METHOD_NOT_ALLOWED"
	StatusUnauthorized         = "UNAUTHORIZED"
	StatusUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	StatusPayloadTooLarge      = "PAYLOAD_TOO_LARGE"
	StatusRequestTimeout       = "REQUEST_TIMEOUT"
	StatusInvalidPayload       = "INVALID_PAYLOAD"
	StatusRequestInFlight      = "REQUEST_IN_FLIGHT"
	StatusAlreadyProcessed     = "ALREADY_PROCESSED"
	StatusServiceUnavailable   = "SERVICE_UNAVAILABLE"
	StatusTooManyRequests      = "TOO_MANY_REQUESTS"
	StatusPublishedConfirmed   = "PUBLISHED_CONFIRMED"
	StatusNotFound             = "NOT_FOUND"
	// StatusAuthThrottled (429): too many refused credentials from this
	// client IP or on this source; the body adds a PT-BR "message" and
	// "retry_after" (seconds, also in Retry-After). docs/webhooks.md §2.
	StatusAuthThrottled = "AUTH_THROTTLED"
)

// MessagePublisher is what the ingress needs from a publisher: Publish
// returns nil only when the broker confirmed the message with no return,
// else an error that Reason maps to a 503 reason. *publish.Publisher
// implements it.
type MessagePublisher interface {
	Publish(ctx context.Context, m publish.Message) error
}

var _ MessagePublisher = (*publish.Publisher)(nil)

// Options configure an Ingress. Sources, and AuthFailures's fields, are
// required.
type Options struct {
	// Sources are served, each under its Path.
	Sources []Source
	// DedupSize is how many event ids are remembered, DedupTTL for how
	// long.
	DedupSize int
	DedupTTL  time.Duration
	// MaxBodyBytes caps a request body (beyond it: 413).
	MaxBodyBytes int64
	// UnauthenticatedBodyBytes bounds the bytes that bodies of
	// signature-only sources (unauthenticated until the whole body is
	// read and verified) hold at once across all requests (0: no budget;
	// webhook.unauthenticated_body_bytes holds the default); a body that
	// would pass it is answered 503 BODY_BUDGET_EXHAUSTED with
	// Retry-After: 1.
	UnauthenticatedBodyBytes int64
	// BodyTimeout bounds reading one body (0: no bound; beyond it: 408).
	BodyTimeout time.Duration
	// AuthFailures is the failed-authentication throttle.
	AuthFailures AuthFailures
	// Clock decides the signatures' timestamp window, the dedup TTL and
	// the failed-auth throttle's window (nil: the wall clock).
	Clock clock.Clock
}

// AuthFailures is the failed-authentication throttle (docs/webhooks.md
// §2): PerIP failures per (source, client IP) and PerSource per source
// within Window, MaxClients client IPs remembered. All at least 1, Window
// positive.
type AuthFailures struct {
	PerIP, PerSource, MaxClients int
	Window                       time.Duration
}

// Ingress is the webhook http.Handler. Mount it at every path of Paths
// (and their sub-paths), before host routing, on any Host.
type Ingress struct {
	sources []*source
	bases   [][]string // each source's segs, in sources' order (RedactPath)
	paths   []string   // each source's path, in sources' order
	pub     MessagePublisher
	dedup   *dedup
	maxBody int64
	budget  *bodyBudget // unauthenticated bodies in memory (bodybudget.go)
	// authBudget bounds token-authenticated bodies in memory alike, with
	// a budget of the same size of their own (attack A77: one token
	// holder, 300 connections × 1 MiB Content-Length, RSS 49 → 359 MB).
	authBudget *bodyBudget
	bodyTime   time.Duration // Options.BodyTimeout
	logger     *slog.Logger
	metrics    *ingressMetrics
	now        func() time.Time // received_at, signature timestamps, throttle, dedup; tests freeze it
	throttle   *authThrottle
	clientIP   func(*http.Request) string
	known      knownTokens // every source's tokens (RedactPath)
}

// New builds the ingress of opts, publishing through pub. It returns an
// error when opts has no source, when a source has no credential (no token
// and no signature: the ingress refuses to start rather than accept
// everything) or a signature secret it cannot decode, when AuthFailures is
// out of range, or when its metrics cannot be registered on reg.
func New(opts Options, pub MessagePublisher, logger *slog.Logger, reg prometheus.Registerer) (*Ingress, error) {
	if len(opts.Sources) == 0 {
		return nil, errors.New("building webhook ingress: no source configured")
	}
	sources, err := compileSources(opts.Sources)
	broken := 0
	for _, s := range sources {
		if s.broken != nil {
			broken++
		}
	}
	if broken == len(sources) {
		// Nothing to serve: the caller stands Unconfigured in (readiness
		// fails, every path answers 503).
		return nil, err
	}
	af := opts.AuthFailures
	if af.PerIP < 1 || af.PerSource < 1 || af.Window <= 0 || af.MaxClients < 1 {
		return nil, fmt.Errorf("building webhook ingress: auth failures: per_ip, per_source, max_clients must be at least 1 and window positive (got %d, %d, %d, %s)",
			af.PerIP, af.PerSource, af.MaxClients, af.Window)
	}
	m, err := newIngressMetrics(reg)
	if err != nil {
		return nil, err
	}
	i := &Ingress{
		sources:    sources,
		bases:      sourceBases(sources),
		paths:      sourcePaths(sources),
		pub:        pub,
		dedup:      newDedup(opts.DedupSize, opts.DedupTTL),
		maxBody:    opts.MaxBodyBytes,
		budget:     &bodyBudget{limit: opts.UnauthenticatedBodyBytes, share: opts.MaxBodyBytes},
		authBudget: &bodyBudget{limit: opts.UnauthenticatedBodyBytes, share: opts.MaxBodyBytes},
		bodyTime:   opts.BodyTimeout,
		logger:     logger.With("component", "webhook-ingress"),
		metrics:    m,
		now:        clock.Or(opts.Clock).Now,
		clientIP:   peerIP,
		known:      newKnownTokens(opts.Sources),
	}
	i.throttle = newAuthThrottle(af.PerIP, af.PerSource, af.MaxClients, af.Window)
	for _, s := range sources {
		if s.broken != nil {
			// One line per broken source at start; its requests are
			// counted (borda_webhook_requests_total), not logged each.
			i.logger.Error("webhook source not configured; its path answers 503 NOT_CONFIGURED until fixed, the other sources are served",
				"source", s.name, "path", s.path, "err", s.broken)
			i.metrics.notConfigured.WithLabelValues(s.name).Set(1)
		}
	}
	return i, nil
}

// SetClientIP sets how the ingress names a request's client for the
// failed-authentication throttle: f returns the client IP as the gateway
// resolved it (trusted proxies applied; IPv6 as its prefix), e.g.
// gateway.ClientSubject. Default: the host of r.RemoteAddr. Call it
// before serving.
func (i *Ingress) SetClientIP(f func(*http.Request) string) {
	if f != nil {
		i.clientIP = func(r *http.Request) string {
			if s := f(r); s != "" {
				return s
			}
			return peerIP(r)
		}
	}
}

// peerIP is the host of r.RemoteAddr (the whole string when it has no
// port).
func peerIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// Paths returns the path of every source, longest first. Each is served
// with all its sub-paths ("/webhooks/whatsapp" and "/webhooks/whatsapp/…").
func (i *Ingress) Paths() []string {
	return sourcePaths(i.sources)
}
