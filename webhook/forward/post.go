package forward

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/olp-edu/borda/internal/egress"
	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/webhook/envelope"
)

// forwardedHeaders are the envelope headers copied to the POST (lower-case
// names as stored by the ingress). Content-Type comes from the envelope's
// own field.
var forwardedHeaders = []string{"user-agent", "traceparent", "x-request-id"}

// defaultUserAgent is sent when the provider sent none (Go's own would leak
// the client library).
const defaultUserAgent = "borda-forward"

// excerptBytes bounds how much of a reply is kept for the DLQ headers.
const excerptBytes = 256

// Kind classifies one POST's result.
type Kind int

// Kinds of result.
const (
	// Delivered: 2xx.
	Delivered Kind = iota + 1
	// Permanent: a 4xx other than 408 and 429 (or a 3xx): retrying cannot
	// help; dead-letter it.
	Permanent
	// Retryable: 5xx, 408, 429, timeout or network error.
	Retryable
)

// Result is the outcome of one POST.
type Result struct {
	Kind Kind
	// Class is the metrics label: 2xx, 3xx, 4xx, 5xx, 408, 429, timeout,
	// network.
	Class string
	// Status is the HTTP status, 0 when no response arrived.
	Status int
	// RetryAfter is the endpoint's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// Excerpt is a printable prefix of the reply body (at most 256 bytes),
	// or the transport error's text.
	Excerpt string
}

// poster POSTs envelopes to the legacy endpoint.
type poster struct {
	client  *http.Client
	url     string
	secret  []byte
	timeout time.Duration
	// v1, v2: which signatures are sent (Options.SignatureVersions).
	v1, v2 bool
	// scrub removes the password and query values of url and the HMAC
	// secret from an excerpt, and redacts its URLs (Options.Scrub), so
	// neither a transport error nor a reply that echoes the request line
	// puts them in a log line or a dead letter's headers.
	scrub func(string) string
	// bareSource keeps the bare id as Idempotency-Key (Options.BareKeySource);
	// sources are every source's name (Options.Sources).
	bareSource string
	sources    []string
}

// newPoster builds the poster of f.
func newPoster(client *http.Client, f Options) *poster {
	p := &poster{client: client, url: f.URL, secret: f.HMACSecret, timeout: f.Timeout, scrub: f.Scrub, bareSource: f.BareKeySource, sources: f.Sources}
	p.v1, p.v2 = len(f.SignatureVersions) == 0, len(f.SignatureVersions) == 0
	for _, v := range f.SignatureVersions {
		p.v1 = p.v1 || v == SignatureV1
		p.v2 = p.v2 || v == SignatureV2
	}
	return p
}

// validVersions reports whether every entry of vs is a signature version.
func validVersions(vs []string) bool {
	for _, v := range vs {
		if v != SignatureV1 && v != SignatureV2 {
			return false
		}
	}
	return true
}

// post sends env's body, signed at now. It never returns an error: a
// failure is a Result of kind Retryable.
func (p *poster) post(ctx context.Context, env envelope.Envelope, now time.Time) Result {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(env.Body))
	if err != nil {
		return Result{Kind: Permanent, Class: "request", Excerpt: p.excerpt([]byte(err.Error()))}
	}
	// bytes.Reader sets ContentLength, so the body is never chunked.
	req.Header = p.headers(env, now)
	resp, err := p.client.Do(req)
	if err != nil {
		class := "network"
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			class = "timeout"
		}
		// *url.Error's text holds LEGACY_WEBHOOK_URL whole (userinfo,
		// ?token=): the excerpt goes to logs and the DLQ headers.
		return Result{Kind: Retryable, Class: class, Excerpt: p.excerpt([]byte(err.Error()))}
	}
	defer resp.Body.Close()
	// Twice the excerpt, so a secret straddling its end is still whole
	// when scrubbed.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 2*excerptBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	r := classify(resp.StatusCode, resp.Header.Get("Retry-After"), head, now)
	if r.Excerpt != "" {
		r.Excerpt = p.excerpt(head)
	}
	if err := egress.RedirectError(resp); err != nil {
		// Where it pointed (its host only), for the dead letter's reason.
		r.Excerpt = p.excerpt([]byte(err.Error()))
	}
	return r
}

// excerpt is safeExcerpt with the legacy URL's secrets removed and every
// URL redacted (Options.Scrub).
func (p *poster) excerpt(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return safeExcerpt([]byte(p.scrub(string(b))))
}

func (p *poster) headers(env envelope.Envelope, now time.Time) http.Header {
	h := make(http.Header, 8)
	for _, name := range forwardedHeaders {
		// A value Go's client refuses (CR, LF, NUL: a message queued before
		// the ingress sanitized headers) would fail every POST of the event
		// until it is dead-lettered; it is dropped instead.
		if v, ok := env.Headers[name]; ok && v != "" && validFieldValue(v) {
			h.Set(name, v)
		}
	}
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", defaultUserAgent)
	}
	if env.ContentType != "" {
		h.Set("Content-Type", env.ContentType)
	}
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderIdempotencyKey, p.idempotencyKey(env))
	if env.Source != "" {
		h.Set("X-Borda-Source", env.Source)
	}
	if p.v1 {
		h.Set(HeaderSignature, Sign(p.secret, now, env.Body))
	}
	if p.v2 {
		// Over the values as they are sent, set above.
		h.Set(HeaderSignatureV2, SignV2(p.secret, now, h.Get(HeaderIdempotencyKey), h.Get("Content-Type"), env.Body))
	}
	return h
}

// idempotencyKey is the POST's Idempotency-Key of env: IdempotencyKey of
// the id for the bare-key source (and an envelope without a source),
// else of "{source}:{id}" (docs/forwarder.md, "The POST"). A bare id that
// reads as another source's key ("zapster:…", an Evolution instance named
// zapster) is qualified too, so the keys of two (source, id) pairs never
// meet: a bare key never starts with a source's name and ':', and a
// qualified one names its source before its first ':' (source names hold
// no ':').
func (p *poster) idempotencyKey(env envelope.Envelope) string {
	src := env.Source
	if src == "" {
		src = p.bareSource
	}
	if src == p.bareSource && !p.readsAsSourceKey(env.ID) {
		return IdempotencyKey(env.ID)
	}
	return IdempotencyKey(src + ":" + env.ID)
}

// readsAsSourceKey reports whether id starts with a source's name and
// ':' (the bare source's own included).
func (p *poster) readsAsSourceKey(id string) bool {
	name, _, ok := strings.Cut(id, ":")
	if !ok {
		return false
	}
	return name == p.bareSource || slices.Contains(p.sources, name)
}

// maxKeyLen bounds an Idempotency-Key sent as the event id itself.
const maxKeyLen = 255

// IdempotencyKey is the Idempotency-Key header of the event id: the id
// itself when it is 1 to 255 bytes of valid UTF-8, every rune printable
// (unicode.IsPrint: no control characters, CR, LF, tab or escape),
// without leading or trailing space; else "sha256-" and the lower-case
// hex SHA-256 of the id's bytes, so a hostile id of a message queued
// before the ingress sanitized ids never yields an invalid or injected
// header, and every attempt of that event sends the same key
// (docs/forwarder.md, "The POST").
func IdempotencyKey(id string) string {
	ok := id != "" && len(id) <= maxKeyLen && utf8.ValidString(id) && strings.TrimSpace(id) == id
	for _, r := range id {
		if !ok {
			break
		}
		ok = unicode.IsPrint(r)
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// validFieldValue reports whether v is a valid HTTP field value (RFC 9110
// §5.5: no control characters other than horizontal tab).
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// classify maps a response to its Result (docs/forwarder.md, "Outcomes").
func classify(status int, retryAfter string, body []byte, now time.Time) Result {
	r := Result{Status: status, Excerpt: safeExcerpt(body)}
	switch {
	case status >= 200 && status < 300:
		r.Kind, r.Class, r.Excerpt = Delivered, "2xx", ""
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests:
		r.Kind, r.Class = Retryable, strconv.Itoa(status)
	case status >= 500:
		r.Kind, r.Class = Retryable, "5xx"
	case status >= 400:
		r.Kind, r.Class = Permanent, "4xx"
	default:
		r.Kind, r.Class = Permanent, fmt.Sprintf("%dxx", status/100)
	}
	if r.Kind == Retryable {
		r.RetryAfter = ParseRetryAfter(retryAfter, now)
	}
	return r
}

// safeExcerpt keeps at most excerptBytes of b as printable UTF-8 on one
// line: invalid bytes and control characters become '?' and whitespace
// runs one space, so it is safe in AMQP headers, logs and terminals.
//
// Every credential-named parameter's value (token=, password=, "secret":,
// api_key=, Authorization: Bearer …, any case and quoting) is redacted
// first (redact.Params): an endpoint that echoes its request or its
// configuration must not put a secret in the log or the dead letter.
func safeExcerpt(b []byte) string {
	b = []byte(redact.Params(string(b)))
	if len(b) > excerptBytes {
		b = b[:excerptBytes]
	}
	var sb strings.Builder
	space := false
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		b = b[n:]
		switch {
		case r == utf8.RuneError && n <= 1:
			sb.WriteByte('?')
			space = false
		case unicode.IsSpace(r):
			if !space {
				sb.WriteByte(' ')
			}
			space = true
		case !unicode.IsPrint(r):
			sb.WriteByte('?')
			space = false
		default:
			sb.WriteRune(r)
			space = false
		}
	}
	return strings.TrimSpace(sb.String())
}
