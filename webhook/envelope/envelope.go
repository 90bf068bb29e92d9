// Package envelope defines the message the webhook ingress publishes to
// RabbitMQ and every consumer reads (docs/webhooks.md §5): the provider's raw
// request bytes, untouched, with the event id and the request metadata.
//
// Wire form (JSON, content type application/json):
//
//	{"id":"…","source":"evolution","received_at":"2026-01-01T06:50:00.412Z",
//	 "content_type":"application/json","headers":{"user-agent":"…"},
//	 "body_b64":"<standard base64 of the raw bytes>","sha256":"<lower-case hex>"}
//
// "event" (omitted when empty) is the event name the URL carried.
// When a source redacts body fields before publishing, "redacted" lists
// them and "original_sha256" is the digest of the bytes as received.
package envelope

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ContentType is the AMQP content type of an encoded Envelope.
const ContentType = "application/json"

// Envelope is one received webhook event.
type Envelope struct {
	// ID is the event id (delivery-id header, configured body fields, or
	// the SHA-256 of the body); it is also the AMQP message_id.
	ID string `json:"id"`
	// Source is the ingress source name ("whatsapp" for the flat config).
	Source string `json:"source"`
	// ReceivedAt is when the ingress read the request, RFC 3339 UTC.
	ReceivedAt time.Time `json:"received_at"`
	// ContentType is the request's Content-Type as sent.
	ContentType string `json:"content_type"`
	// Headers are the allowlisted request headers, lower-case names.
	Headers map[string]string `json:"headers"`
	// Body is the raw request body; JSON encodes it as standard base64.
	Body []byte `json:"body_b64"`
	// SHA256 is the lower-case hex SHA-256 of Body.
	SHA256 string `json:"sha256"`
	// Event is the event name taken from the URL (the last sub-path
	// segment, or what Evolution's "webhook by events" appended), when
	// there is one; consumers should prefer the body's own event field.
	Event string `json:"event,omitempty"`
	// Redacted lists body fields removed before publishing (opt-in).
	Redacted []string `json:"redacted,omitempty"`
	// OriginalSHA256 is the digest of the body as received, when Redacted
	// is set.
	OriginalSHA256 string `json:"original_sha256,omitempty"`
	// Sender names the credential that admitted the event: its credential
	// group (the first source, in configuration order, of the sources
	// that accept the same token or secret), never the credential itself.
	// The forwarder's breaker counts senders (docs/forwarder.md, "What
	// the breaker counts"). Empty in envelopes of earlier releases.
	Sender string `json:"sender,omitempty"`
}

// Errors returned by Decode.
var (
	// ErrMalformed: the message is not an envelope (bad JSON, bad base64,
	// missing id).
	ErrMalformed = errors.New("envelope: malformed")
	// ErrDigestMismatch: the body's SHA-256 differs from the sha256 field.
	ErrDigestMismatch = errors.New("envelope: sha256 does not match body")
)

// New builds an envelope for body, computing its digest.
func New(id, source, contentType string, headers map[string]string, body []byte, receivedAt time.Time) Envelope {
	return Envelope{
		ID:          id,
		Source:      source,
		ReceivedAt:  receivedAt.UTC(),
		ContentType: contentType,
		Headers:     headers,
		Body:        body,
		SHA256:      Digest(body),
	}
}

// Digest returns the lower-case hex SHA-256 of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Encode returns the wire form: the same bytes as json.Marshal(e) (a test
// and a fuzzer hold it to that), built in one buffer sized up front with the
// body base64-encoded straight into it (a 10 MB body costs one 13.3 MB
// allocation, not a pooled encoder buffer plus a copy), and without
// reflection: every delivery is encoded once, on the request path.
// It returns an error only for a ReceivedAt outside years 0-9999, as
// json.Marshal does.
func (e Envelope) Encode() ([]byte, error) {
	return e.AppendEncode(make([]byte, 0, e.EncodedSizeHint()))
}

// EncodedSizeHint is the capacity Encode allocates, in bytes: room for
// the whole wire form unless its strings need JSON escapes.
func (e Envelope) EncodedSizeHint() int {
	size := 160 + len(e.ID) + len(e.Source) + len(e.ContentType) + base64.StdEncoding.EncodedLen(len(e.Body)) +
		len(e.SHA256) + len(e.Event) + len(e.OriginalSHA256) + len(e.Sender)
	for k, v := range e.Headers {
		size += len(k) + len(v) + 6
	}
	for _, r := range e.Redacted {
		size += len(r) + 3
	}
	return size
}

// AppendEncode appends what Encode returns to buf and returns the
// extended slice (the caller's buffer may be reused once it is done with
// the result); it fails as Encode does.
func (e Envelope) AppendEncode(buf []byte) ([]byte, error) {
	buf = append(buf, `{"id":`...)
	buf = appendJSONString(buf, e.ID)
	buf = append(buf, `,"source":`...)
	buf = appendJSONString(buf, e.Source)
	buf = append(buf, `,"received_at":"`...)
	buf, err := e.ReceivedAt.AppendText(buf) // what Time.MarshalJSON writes, unquoted
	if err != nil {
		return nil, fmt.Errorf("encoding envelope: %w", err)
	}
	buf = append(buf, `","content_type":`...)
	buf = appendJSONString(buf, e.ContentType)
	buf = append(buf, `,"headers":`...)
	if e.Headers == nil {
		buf = append(buf, "null"...)
	} else {
		var stack [8]string
		keys := stack[:0]
		for k := range e.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys) // json.Marshal sorts map keys
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			buf = appendJSONString(buf, e.Headers[k])
		}
		buf = append(buf, '}')
	}
	buf = append(buf, `,"body_b64":`...)
	if e.Body == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '"')
		buf = base64.StdEncoding.AppendEncode(buf, e.Body)
		buf = append(buf, '"')
	}
	buf = append(buf, `,"sha256":`...)
	buf = appendJSONString(buf, e.SHA256)
	if e.Event != "" {
		buf = append(buf, `,"event":`...)
		buf = appendJSONString(buf, e.Event)
	}
	if len(e.Redacted) > 0 {
		buf = append(buf, `,"redacted":[`...)
		for i, r := range e.Redacted {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, r)
		}
		buf = append(buf, ']')
	}
	if e.OriginalSHA256 != "" {
		buf = append(buf, `,"original_sha256":`...)
		buf = appendJSONString(buf, e.OriginalSHA256)
	}
	if e.Sender != "" {
		buf = append(buf, `,"sender":`...)
		buf = appendJSONString(buf, e.Sender)
	}
	return append(buf, '}'), nil
}

// appendJSONString appends s as encoding/json writes a string: printable
// ASCII other than '"', '\\', '<', '>' and '&' as is; anything else (escapes,
// HTML-safe \u003c forms, UTF-8 checks) through json.Marshal itself.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// Decode parses the wire form and checks the digest. It returns an error
// wrapping ErrMalformed or ErrDigestMismatch; a mismatch still returns the
// decoded envelope so the caller can dead-letter it with its id.
func Decode(data []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return Envelope{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if e.ID == "" {
		return e, fmt.Errorf("%w: no id", ErrMalformed)
	}
	if got := Digest(e.Body); got != e.SHA256 {
		return e, fmt.Errorf("%w: sha256 %q, body hashes to %q", ErrDigestMismatch, e.SHA256, got)
	}
	return e, nil
}
