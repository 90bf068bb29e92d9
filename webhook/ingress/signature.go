package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// verifier checks a provider's signature over the raw request bytes,
// before anything parses them (docs/webhooks.md, "Signed sources").
type verifier interface {
	// present reports whether the request carries the scheme's headers, so
	// an unsigned request is refused before its body is read.
	present(h http.Header) bool
	// verify checks the signature of body at time now.
	verify(h http.Header, body []byte, now time.Time) error
	// fields are the canonical names of every header the scheme reads
	// (the signature, and what it signs besides the body).
	fields() []string
}

// repeatedField reports whether one of names came on more than one line
// with values that differ (Header.Values sees them all; Get only the
// first). RFC 9110 §5.3 allows a repeated field only for list-based
// fields, and a verifier that reads the first line while a proxy or the
// id reads another would disagree on what was signed (attack B04).
// Identical repeats (a proxy that duplicated a line) read one way and
// pass.
func repeatedField(h http.Header, names []string) bool {
	for _, name := range names {
		if vs := h[name]; len(vs) > 1 {
			for _, v := range vs[1:] {
				if v != vs[0] {
					return true
				}
			}
		}
	}
	return false
}

// The header fields of each scheme, canonical (signatureFields).
var (
	githubFields   = []string{"X-Hub-Signature-256"}
	stripeFields   = []string{"Stripe-Signature"}
	standardFields = []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}
)

func (githubVerifier) fields() []string   { return githubFields }
func (stripeVerifier) fields() []string   { return stripeFields }
func (standardVerifier) fields() []string { return standardFields }

var errBadSignature = errors.New("signature does not match")

// StandardKey decodes a Standard Webhooks secret ("whsec_" and the
// base64 of the key, or the base64 alone) into its HMAC key. An empty key
// ("whsec_" alone, as a template with an unset variable gives) is an
// error: anyone can sign with it.
func StandardKey(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(secret), "whsec_"))
	if err != nil {
		return nil, fmt.Errorf("decoding whsec_ secret: %w", err)
	}
	if len(k) == 0 {
		return nil, errors.New("a whsec_ secret with an empty key (anyone could sign with it)")
	}
	return k, nil
}

func newVerifier(scheme string, secrets []string, tolerance time.Duration) (verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no secret configured")
	}
	keys := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		if scheme == "standard" {
			k, err := StandardKey(s)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
			continue
		}
		if strings.TrimSpace(s) == "" {
			// An empty HMAC key is one anyone can sign with.
			return nil, errors.New("an empty signing secret")
		}
		keys = append(keys, []byte(s))
	}
	switch scheme {
	case "github":
		return githubVerifier{keys}, nil
	case "stripe":
		return stripeVerifier{keys, tolerance}, nil
	case "standard":
		return standardVerifier{keys, tolerance}, nil
	}
	return nil, fmt.Errorf("unknown signature scheme %q", scheme)
}

func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// githubVerifier: X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>
// (GitHub, "Validating webhook deliveries").
type githubVerifier struct{ keys [][]byte }

func (githubVerifier) present(h http.Header) bool { return h.Get("X-Hub-Signature-256") != "" }

func (v githubVerifier) verify(h http.Header, body []byte, _ time.Time) error {
	sig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
	if !ok {
		return errBadSignature
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return errBadSignature
	}
	for _, k := range v.keys {
		if hmac.Equal(got, mac(k, body)) {
			return nil
		}
	}
	return errBadSignature
}

// stripeVerifier: Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…], the
// HMAC-SHA256 of "<t>.<body>"; |now - t| must be within tolerance.
type stripeVerifier struct {
	keys      [][]byte
	tolerance time.Duration
}

func (stripeVerifier) present(h http.Header) bool { return h.Get("Stripe-Signature") != "" }

func (v stripeVerifier) verify(h http.Header, body []byte, now time.Time) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(h.Get("Stripe-Signature"), ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = val
		case "v1":
			if b, err := hex.DecodeString(val); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if err := checkTimestamp(ts, now, v.tolerance); err != nil {
		return err
	}
	for _, k := range v.keys {
		want := mac(k, []byte(ts), []byte("."), body)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				return nil
			}
		}
	}
	return errBadSignature
}

// standardVerifier implements Standard Webhooks (standardwebhooks.com):
// webhook-signature "v1,<base64> v1,<base64>…" over
// "<webhook-id>.<webhook-timestamp>.<body>" with the base64-decoded
// whsec_ key; |now - timestamp| within tolerance.
type standardVerifier struct {
	keys      [][]byte
	tolerance time.Duration
}

func (standardVerifier) present(h http.Header) bool {
	return h.Get("Webhook-Signature") != "" && h.Get("Webhook-Id") != "" && h.Get("Webhook-Timestamp") != ""
}

func (v standardVerifier) verify(h http.Header, body []byte, now time.Time) error {
	id, ts := h.Get("Webhook-Id"), h.Get("Webhook-Timestamp")
	if err := checkTimestamp(ts, now, v.tolerance); err != nil {
		return err
	}
	var sigs [][]byte
	for _, s := range strings.Fields(h.Get("Webhook-Signature")) {
		if b64, ok := strings.CutPrefix(s, "v1,"); ok {
			if b, err := base64.StdEncoding.DecodeString(b64); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	for _, k := range v.keys {
		want := mac(k, []byte(id), []byte("."), []byte(ts), []byte("."), body)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				return nil
			}
		}
	}
	return errBadSignature
}

func checkTimestamp(ts string, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("signature timestamp missing or not unix seconds")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("signature timestamp %s outside the %s tolerance", ts, tolerance)
	}
	return nil
}
