package ingress

import (
	"fmt"
	"net/http"
	"net/textproto"
	"time"

	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/publish"
)

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

// message builds the envelope, redacting the source's fields if asked,
// its headers in sc's map and encoded into sc's buffer when it has room
// (scratch.go). Its errors are local (a body the redaction cannot read,
// a time the envelope cannot encode), never the broker's: serve answers
// them 503 INTERNAL_ERROR.
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
			return publish.Message{}, fmt.Errorf("redacting the body: %w", err)
		}
	}
	env := envelope.New(id, src.name, headers["content-type"], headers, body, at)
	env.Event = target.event
	env.Sender = src.sender
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
		return publish.Message{}, fmt.Errorf("encoding the envelope: %w", err)
	}
	return publish.Message{ID: id, RoutingKey: src.routingKey, Body: data, Timestamp: at}, nil
}
