// Package envelope defines the message the webhook ingress publishes to
// RabbitMQ and every consumer reads (design.md §6): the provider's raw
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

// Encode returns the wire form: the same bytes as json.Marshal(e), built
// in one buffer sized up front, with the body base64-encoded straight into
// it (a 10 MB body costs one 13.3 MB allocation, not a pooled encoder
// buffer plus a copy).
func (e Envelope) Encode() ([]byte, error) {
	small := struct {
		ID          string            `json:"id"`
		Source      string            `json:"source"`
		ReceivedAt  time.Time         `json:"received_at"`
		ContentType string            `json:"content_type"`
		Headers     map[string]string `json:"headers"`
	}{e.ID, e.Source, e.ReceivedAt, e.ContentType, e.Headers}
	head, err := json.Marshal(small)
	if err != nil {
		return nil, fmt.Errorf("encoding envelope: %w", err)
	}
	tail, err := json.Marshal(struct {
		SHA256         string   `json:"sha256"`
		Event          string   `json:"event,omitempty"`
		Redacted       []string `json:"redacted,omitempty"`
		OriginalSHA256 string   `json:"original_sha256,omitempty"`
	}{e.SHA256, e.Event, e.Redacted, e.OriginalSHA256})
	if err != nil {
		return nil, fmt.Errorf("encoding envelope: %w", err)
	}
	const key = `,"body_b64":`
	buf := make([]byte, 0, len(head)+len(key)+base64.StdEncoding.EncodedLen(len(e.Body))+len(tail)+4)
	buf = append(buf, head[:len(head)-1]...) // without '}'
	buf = append(buf, key...)
	if e.Body == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '"')
		buf = base64.StdEncoding.AppendEncode(buf, e.Body)
		buf = append(buf, '"')
	}
	buf = append(buf, ',')
	buf = append(buf, tail[1:]...) // without '{'
	return buf, nil
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
