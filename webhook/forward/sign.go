package forward

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Headers the forwarder adds to every POST (docs/forwarder.md, "The POST").
const (
	// HeaderTimestamp carries the signing time in unix seconds.
	HeaderTimestamp = "X-Webhook-Timestamp"
	// HeaderSignature carries the bare lower-case hex HMAC-SHA256 of
	// timestamp + "." + body, keyed with LEGACY_WEBHOOK_HMAC_SECRET.
	HeaderSignature = "X-Webhook-Signature"
	// HeaderIdempotencyKey carries the event id; the receiver deduplicates
	// by it (a redelivery after a crash may POST the same event again).
	HeaderIdempotencyKey = "Idempotency-Key"
)

// MaxSignatureAge is how old a signed timestamp Verify accepts (5 minutes,
// either direction, to tolerate clock skew).
const MaxSignatureAge = 5 * time.Minute

// Errors returned by Verify.
var (
	ErrMissingSignature = errors.New("forward: missing signature or timestamp")
	ErrBadTimestamp     = errors.New("forward: timestamp is not unix seconds")
	ErrStaleTimestamp   = errors.New("forward: timestamp older than 5 minutes or in the future")
	ErrBadSignature     = errors.New("forward: signature does not match")
	// ErrNoSecret: Verify or VerifyV2 was given no secret that is not
	// empty. An empty secret is never used: anyone can sign with it.
	ErrNoSecret = errors.New("forward: no secret to verify with (an empty secret is never used)")
)

// Sign returns the signature of body at ts: the bare lower-case hex
// HMAC-SHA256 of strconv.FormatInt(ts.Unix(), 10) + "." + body, keyed with
// secret. body must be the exact bytes sent.
func Sign(secret []byte, ts time.Time, body []byte) string {
	return hex.EncodeToString(mac(secret, strconv.FormatInt(ts.Unix(), 10), body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify is the receiving side's check of a forwarded POST. timestamp and
// signature are the X-Webhook-Timestamp and X-Webhook-Signature header
// values, body the raw request bytes (read before any parsing), now the
// receiver's clock. It returns nil when the signature matches (constant-time
// comparison) and the timestamp is within MaxSignatureAge of now; else
// ErrMissingSignature, ErrBadTimestamp, ErrStaleTimestamp,
// ErrBadSignature or ErrNoSecret. Several secrets may be passed during a
// rotation; any one matching is enough. An empty secret is skipped (an
// unset variable of a finished rotation must not let anyone sign), and
// with no other secret Verify fails with ErrNoSecret.
//
//	err := forward.Verify(r.Header.Get("X-Webhook-Timestamp"),
//		r.Header.Get("X-Webhook-Signature"), body, time.Now(), secret)
//
// After Verify, deduplicate by the Idempotency-Key header.
func Verify(timestamp, signature string, body []byte, now time.Time, secrets ...[]byte) error {
	got, err := checkSigned(timestamp, signature, now, secrets)
	if err != nil {
		return err
	}
	for _, s := range secrets {
		if len(s) > 0 && hmac.Equal(got, mac(s, timestamp, body)) {
			return nil
		}
	}
	return ErrBadSignature
}

// HeaderSignatureV2 carries the version-2 signature: the bare lower-case
// hex HMAC-SHA256, keyed with LEGACY_WEBHOOK_HMAC_SECRET, of
//
//	timestamp + "\n" + Idempotency-Key + "\n" + Content-Type + "\n" + body
//
// (SignV2). Unlike HeaderSignature (version 1, timestamp + "." + body), it
// covers the two headers a receiver acts on, so neither can be changed on
// a captured request. A header value holds no "\n" (RFC 9110 §5.5), so
// the fields cannot be shifted into one another.
const HeaderSignatureV2 = "X-Webhook-Signature-V2"

// Signature versions (Options.SignatureVersions).
const (
	SignatureV1 = "v1"
	SignatureV2 = "v2"
)

// SignV2 returns the version-2 signature (HeaderSignatureV2) of a POST at
// ts with the given Idempotency-Key and Content-Type header values (as
// sent; "" when absent) and body (the exact bytes sent).
func SignV2(secret []byte, ts time.Time, idempotencyKey, contentType string, body []byte) string {
	return hex.EncodeToString(macV2(secret, strconv.FormatInt(ts.Unix(), 10), idempotencyKey, contentType, body))
}

func macV2(secret []byte, ts, key, ct string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, s := range []string{ts, key, ct} {
		m.Write([]byte(s))
		m.Write([]byte{'\n'})
	}
	m.Write(body)
	return m.Sum(nil)
}

// VerifyV2 is Verify for the version-2 signature: timestamp and signature
// are the X-Webhook-Timestamp and X-Webhook-Signature-V2 values,
// idempotencyKey and contentType the Idempotency-Key and Content-Type
// values as received, body the raw bytes. It returns the errors Verify
// returns, under the same rules (MaxSignatureAge, constant-time
// comparison, any one of secrets).
//
//	err := forward.VerifyV2(r.Header.Get("X-Webhook-Timestamp"),
//		r.Header.Get("X-Webhook-Signature-V2"), r.Header.Get("Idempotency-Key"),
//		r.Header.Get("Content-Type"), body, time.Now(), secret)
func VerifyV2(timestamp, signature, idempotencyKey, contentType string, body []byte, now time.Time, secrets ...[]byte) error {
	got, err := checkSigned(timestamp, signature, now, secrets)
	if err != nil {
		return err
	}
	for _, s := range secrets {
		if len(s) > 0 && hmac.Equal(got, macV2(s, timestamp, idempotencyKey, contentType, body)) {
			return nil
		}
	}
	return ErrBadSignature
}

// checkSigned checks what Verify and VerifyV2 share: the values are
// there, the timestamp is unix seconds within MaxSignatureAge of now, and
// the signature is hex. It returns the decoded signature.
func checkSigned(timestamp, signature string, now time.Time, secrets [][]byte) ([]byte, error) {
	if !slices.ContainsFunc(secrets, func(s []byte) bool { return len(s) > 0 }) {
		return nil, ErrNoSecret
	}
	if timestamp == "" || signature == "" {
		return nil, ErrMissingSignature
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrBadTimestamp, timestamp)
	}
	age := now.Sub(time.Unix(sec, 0))
	if age > MaxSignatureAge || age < -MaxSignatureAge {
		return nil, ErrStaleTimestamp
	}
	got, err := hex.DecodeString(signature)
	if err != nil {
		return nil, ErrBadSignature
	}
	return got, nil
}
