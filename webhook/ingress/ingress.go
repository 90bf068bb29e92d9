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
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/webhook/envelope"
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
}

// AuthFailures is the failed-authentication throttle (docs/webhooks.md
// §2): PerIP failures per (source, client IP) and PerSource per source
// within Window, MaxClients client IPs remembered. All at least 1, Window
// positive.
type AuthFailures struct {
	PerIP, PerSource, MaxClients int
	Window                       time.Duration
}

// envelopeHeaders are the request headers copied into the envelope
// (lower-case). Credentials and signatures never are.
var envelopeHeaders = []string{
	"content-type", "user-agent", "traceparent", "tracestate", "x-request-id",
	"webhook-id", "webhook-timestamp", "idempotency-key",
	"x-github-delivery", "x-github-event", "x-github-hook-id",
}

// envelopeHeaderKeys are envelopeHeaders in canonical form, the keys of
// http.Header: Header.Get would canonicalise (and allocate) each name on
// every request.
var envelopeHeaderKeys = func() []string {
	keys := make([]string, len(envelopeHeaders))
	for i, name := range envelopeHeaders {
		keys[i] = textproto.CanonicalMIMEHeaderKey(name)
	}
	return keys
}()

// headerValue is h.Get(key) for a key already in canonical form.
func headerValue(h http.Header, key string) string {
	if vs := h[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Body kinds of a Content-Type value (mediaKind).
const (
	mediaOther = iota // refused: 415
	mediaJSON
	mediaForm
)

// mediaKind classifies a Content-Type value: mediaJSON for application/json
// and any +json structured suffix (RFC 6839 §3.1: application/vnd.foo+json),
// mediaForm for application/x-www-form-urlencoded, else mediaOther. The
// media type is read as mime.ParseMediaType reads it (RFC 9110 §8.3.1:
// case-insensitive, parameters and whitespace around them ignored), so
// "Application/JSON; charset=UTF-8" is JSON. It is the one decision both
// the JSON check and redact_fields use: a body parsed as JSON is always
// redacted as JSON (issue 22 item 6). The common exact spellings skip the
// parser and its allocations.
func mediaKind(v string) int {
	switch v {
	case "application/json":
		return mediaJSON
	case "application/x-www-form-urlencoded":
		return mediaForm
	}
	mt, _, err := mime.ParseMediaType(v)
	switch {
	case err != nil:
		return mediaOther
	case mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")):
		return mediaJSON
	case mt == "application/x-www-form-urlencoded":
		return mediaForm
	}
	return mediaOther
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
		now:        time.Now,
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

// ServeHTTP answers one webhook delivery (docs/webhooks.md §3, the status table).
func (i *Ingress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	i.metrics.inflight.Inc()
	defer i.metrics.inflight.Dec()
	status := i.serve(w, r)
	i.metrics.answered(status)
	i.metrics.httpTotal.get(i.metrics.latency, "http_total").Observe(time.Since(start).Seconds())
}

func (i *Ingress) serve(w http.ResponseWriter, r *http.Request) string {
	src, rest := matchSource(i.sources, r.URL.Path)
	if src == nil {
		return respond(w, http.StatusNotFound, StatusNotFound, "")
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return respond(w, http.StatusMethodNotAllowed, StatusMethodNotAllowed, "")
	}
	if src.broken != nil {
		// This source only: providers retry a 503 (they drop on 401).
		w.Header().Set("Retry-After", "60")
		return respond(w, http.StatusServiceUnavailable, StatusServiceUnavailable, ReasonNotConfigured)
	}
	target := parseTarget(rest, r.URL.RawQuery)
	if !safeID(target.event) {
		// "/%1b[2J" or "/%0d%0a…" would carry a terminal escape or a line
		// break into the envelope's event (docs/webhooks.md §5): dropped.
		target.event = ""
	}
	if reason := i.authenticated(src, r, target); reason != "" {
		return i.refuse(w, r, src, reason)
	}
	if !identityCoding(r.Header["Content-Encoding"]) {
		// Attack A04: a gzip body was acknowledged and delivered without
		// its Content-Encoding, undecodable downstream. The ingress
		// decodes no coding, so it refuses them all (RFC 9110 §15.5.16:
		// 415, with Accept-Encoding naming what is accepted).
		w.Header().Set("Accept-Encoding", "identity")
		return respond(w, http.StatusUnsupportedMediaType, StatusUnsupportedMediaType, ReasonContentEncoding)
	}
	if len(r.Header["Content-Type"]) > 1 {
		return respondInvalid(w, ReasonContentTypeRepeated)
	}
	contentType := headerValue(r.Header, "Content-Type")
	kind := mediaKind(contentType)
	isJSON := kind == mediaJSON
	if kind == mediaOther {
		return respond(w, http.StatusUnsupportedMediaType, StatusUnsupportedMediaType, "")
	}
	if r.ContentLength > i.maxBody {
		w.Header().Set("Connection", "close") // never read the junk
		return respond(w, http.StatusRequestEntityTooLarge, StatusPayloadTooLarge, "")
	}
	// Allocate the body at once only for a request a token has
	// authenticated; a signed source's request is unauthenticated until
	// verified, and must not reserve 10 MB with a Content-Length alone.
	hint := r.ContentLength
	if len(src.tokens) == 0 {
		hint = -1
	}
	// A body that trickles in (1 byte a second) must not hold the
	// request open for ever: the server has no ReadTimeout (it would cut
	// the proxy's uploads and streams), so the ingress sets its own.
	rc := http.NewResponseController(w)
	if i.bodyTime > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(i.bodyTime)) // ErrNotSupported: no deadline, as before
	}
	sc := getScratch()
	var in io.Reader = http.MaxBytesReader(w, r.Body, i.maxBody)
	// Every body in memory is charged to a budget (bodybudget.go): an
	// unauthenticated one (signature-only source) to budget, a token
	// source's to authBudget, its Content-Length reserved at once since
	// its buffer is allocated that size.
	var charged *budgetReader
	if len(src.tokens) == 0 {
		charged = i.budget.reader(in, i.clientIP(r))
	} else {
		charged = i.authBudget.reader(in, i.clientIP(r))
	}
	defer charged.release()
	in = charged
	if !charged.reserve(hint) {
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		return respond(w, http.StatusServiceUnavailable, StatusServiceUnavailable, ReasonBodyBudget)
	}
	body, err := readBodyInto(in, hint, sc.body)
	var encoded []byte
	defer func() { sc.put(body, encoded) }() // nothing refers to either once serve returns
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		if errors.Is(err, errBodyBudget) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			return respond(w, http.StatusServiceUnavailable, StatusServiceUnavailable, ReasonBodyBudget)
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			w.Header().Set("Connection", "close")
			return respond(w, http.StatusRequestEntityTooLarge, StatusPayloadTooLarge, "")
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			return respond(w, http.StatusRequestTimeout, StatusRequestTimeout, "")
		}
		return respond(w, http.StatusBadRequest, StatusInvalidPayload, "")
	}
	receivedAt := i.now()
	if src.sig != nil {
		if err := src.sig.verify(r.Header, body, receivedAt); err != nil {
			return i.refuse(w, r, src, authSignatureInvalid, "error", err)
		}
	}
	if len(body) == 0 || (isJSON && !jsonValid(body)) {
		return respond(w, http.StatusBadRequest, StatusInvalidPayload, "")
	}
	// Every body read as JSON (a JSON media type, or a JSON object sent
	// as another type: bodyIsJSON) is read one way by every parser.
	if isJSON = bodyIsJSON(kind, body); isJSON {
		if reason := jsonRefused(body); reason != "" {
			return respondInvalid(w, reason)
		}
	}

	id := src.idOf(r.Header, body, isJSON)
	state, ticket := i.dedup.begin(src.name, id, receivedAt)
	switch state {
	case stateInFlight:
		i.metrics.dedupHits.WithLabelValues(state.String()).Inc()
		w.Header().Set("Retry-After", "2")
		return respond(w, http.StatusTooManyRequests, StatusRequestInFlight, "")
	case stateConfirmed:
		i.metrics.dedupHits.WithLabelValues(state.String()).Inc()
		return respond(w, http.StatusOK, StatusAlreadyProcessed, "")
	}

	// Whatever happens from here (a panic included, which the gateway's
	// recoverer turns into a 500), the claim on the id ends: confirmed,
	// or forgotten so the provider's retry is accepted. A claim left
	// IN_FLIGHT would answer 429 to every retry for dedup_ttl (30 min),
	// longer than Evolution retries: the event would be lost.
	settled := false
	defer func() {
		if !settled {
			i.dedup.forget(ticket)
		}
	}()
	msg, err := i.message(src, r, target, id, body, isJSON, receivedAt, sc)
	encoded = msg.Body
	if err == nil {
		// The provider hanging up must not cut the wait short: the answer
		// decides whether the id is remembered as CONFIRMED.
		ctx := context.Background() // the publisher reads no value from it
		t0 := time.Now()
		err = i.pub.Publish(ctx, msg)
		i.metrics.amqpConfirm.get(i.metrics.latency, "amqp_confirm").Observe(time.Since(t0).Seconds())
	}
	if err != nil {
		i.dedup.forget(ticket) // before answering: the retry must find the id free
		settled = true
		reason := Reason(err)
		i.metrics.failures.WithLabelValues(reason).Inc()
		if reason == ReasonUnroutable {
			i.metrics.unroutable.Inc()
		}
		// Broker state changes are logged once by the publisher and every
		// reason is counted; per-request lines are warnings only for the
		// reasons that point at the topology or the broker's judgement.
		level := slog.LevelDebug
		if reason == ReasonUnroutable || reason == ReasonNack || reason == ReasonForwardQueueMissing {
			level = slog.LevelWarn
		}
		i.logger.Log(r.Context(), level, "webhook not published; answering 503", "source", src.name, "event_id", id, "reason", reason, "error", err)
		w.Header().Set("Retry-After", "5")
		return respond(w, http.StatusServiceUnavailable, StatusServiceUnavailable, reason)
	}
	i.dedup.confirm(ticket, i.now()) // the TTL restarts at the confirm
	settled = true
	return respond(w, http.StatusOK, StatusPublishedConfirmed, "")
}

// authenticated checks the request's credential against the source's
// tokens (when it has any) and that a signed source's headers are there.
// It returns "" when they pass, else the failure reason (auth* constants).
func (i *Ingress) authenticated(src *source, r *http.Request, target requestTarget) string {
	if len(src.tokens) > 0 {
		p := credential(r.Header, target)
		switch {
		case p.repeated:
			return authRepeated
		case p.conflict:
			return authConflict
		case p.method == "":
			return authMissing
		case !src.tokens.match(p.value):
			return authMismatch
		}
	}
	if src.sig != nil {
		if repeatedField(r.Header, src.sig.fields()) {
			return authSignatureRepeated
		}
		if !src.sig.present(r.Header) {
			return authSignatureMissing
		}
	}
	return ""
}

// refuse answers a failed authentication: 401, or 429 AUTH_THROTTLED with
// Retry-After once the client IP or the source is over its failure limit
// (throttle.go). Failures are counted by reason; each one is logged while
// the client is under the limit, and a throttling episode once, so a
// flood of wrong tokens cannot flood the log. args are extra log
// attributes (never a credential).
func (i *Ingress) refuse(w http.ResponseWriter, r *http.Request, src *source, reason string, args ...any) string {
	i.metrics.authFailures.WithLabelValues(reason).Inc()
	client := i.clientIP(r)
	v := i.throttle.fail(src.name, client, i.now())
	if v.wait <= 0 {
		i.logger.Info("webhook authentication refused", append([]any{"source", src.name, "reason", reason, "client_ip", client}, args...)...)
		return respond(w, http.StatusUnauthorized, StatusUnauthorized, "")
	}
	i.metrics.authThrottled.WithLabelValues(v.scope).Inc()
	if v.first {
		i.logger.Warn("webhook authentication failures throttled; answering 429 until they slow down",
			"source", src.name, "scope", v.scope, "client_ip", client, "retry_after_s", retryAfterSeconds(v.wait))
	}
	return respondThrottled(w, retryAfterSeconds(v.wait))
}

// message builds the envelope, redacting the source's fields if asked,
// its headers in sc's map and encoded into sc's buffer when it has room
// (scratch.go).
func (i *Ingress) message(src *source, r *http.Request, target requestTarget, id string, body []byte, isJSON bool, at time.Time, sc *scratch) (publish.Message, error) {
	headers := sc.headers
	clear(headers)
	for n, name := range envelopeHeaders {
		if v := headerValue(r.Header, envelopeHeaderKeys[n]); v != "" {
			headers[name] = v
		}
	}
	original := body
	var removed []string
	if len(src.redact) > 0 && isJSON { // the bytes decide (bodyIsJSON), not the header alone
		var err error
		if body, removed, err = redactFields(body, src.redact); err != nil {
			return publish.Message{}, fmt.Errorf("%w: redacting: %w", publish.ErrBrokerUnavailable, err)
		}
	}
	env := envelope.New(id, src.name, headers["content-type"], headers, body, at)
	env.Event = target.event
	if len(removed) > 0 {
		env.Redacted = removed
		env.OriginalSHA256 = envelope.Digest(original)
	}
	buf := sc.env
	if cap(buf) < env.EncodedSizeHint() {
		buf = make([]byte, 0, env.EncodedSizeHint())
	}
	data, err := env.AppendEncode(buf[:0])
	if err != nil {
		return publish.Message{}, fmt.Errorf("%w: encoding envelope: %w", publish.ErrBrokerUnavailable, err)
	}
	return publish.Message{ID: id, RoutingKey: src.routingKey, Body: data, Timestamp: at}, nil
}
