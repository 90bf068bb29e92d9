package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// deliveryIDHeaders carry a provider's own delivery id, in the order they
// are believed (design.md §6).
var deliveryIDHeaders = []string{"Webhook-Id", "X-GitHub-Delivery", "Idempotency-Key"}

// maxIDLen bounds an event id taken from a header or the body; a longer
// one is replaced by its SHA-256 (AMQP message_id is a short string).
const maxIDLen = 200

// eventID returns the event's identity: a delivery-id header when present,
// else the values of fields (dotted paths into a JSON object body) joined
// with ":" when every one is a present scalar, else the lower-case hex
// SHA-256 of the raw body. isJSON says whether body is JSON.
func eventID(h http.Header, body []byte, isJSON bool, fields [][]string) string {
	for _, name := range deliveryIDHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return bounded(v)
		}
	}
	if isJSON && len(fields) > 0 {
		if v, ok := fieldsID(body, fields); ok {
			return bounded(v)
		}
	}
	return digestHex(body)
}

func fieldsID(body []byte, fields [][]string) (string, bool) {
	if len(fields) == 1 {
		return lookupScalar(body, fields[0]) // the common case: no join
	}
	vals := make([]string, 0, len(fields))
	for _, path := range fields {
		v, ok := lookupScalar(body, path)
		if !ok {
			return "", false
		}
		vals = append(vals, v)
	}
	return strings.Join(vals, ":"), true
}

// lookupScalar follows path through nested objects of the JSON object
// body and returns a non-empty string or a number leaf as text.
func lookupScalar(body []byte, path []string) (string, bool) {
	if len(path) == 0 {
		return "", false
	}
	raw := body
	for _, key := range path {
		var ok bool
		if raw, ok = jsonMember(raw, key); !ok {
			return "", false
		}
	}
	switch {
	case len(raw) > 0 && raw[0] == '"':
		s, ok := jsonString(raw)
		return s, ok && s != ""
	case len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')):
		return string(raw), true
	}
	return "", false
}

func bounded(id string) string {
	if len(id) <= maxIDLen {
		return id
	}
	return digestHex([]byte(id))
}

func digestHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
