package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return "", false
	}
	vals := make([]string, 0, len(fields))
	for _, path := range fields {
		v, ok := lookupScalar(top, path)
		if !ok {
			return "", false
		}
		vals = append(vals, v)
	}
	return strings.Join(vals, ":"), true
}

// lookupScalar follows path through nested objects and returns a string
// or number leaf as text.
func lookupScalar(obj map[string]json.RawMessage, path []string) (string, bool) {
	for i, key := range path {
		raw, ok := obj[key]
		if !ok {
			return "", false
		}
		if i < len(path)-1 {
			obj = nil
			if json.Unmarshal(raw, &obj) != nil || obj == nil {
				return "", false
			}
			continue
		}
		raw = bytes.TrimSpace(raw)
		switch {
		case len(raw) > 0 && raw[0] == '"':
			var s string
			if json.Unmarshal(raw, &s) != nil || s == "" {
				return "", false
			}
			return s, true
		case len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')):
			return string(raw), true
		}
		return "", false
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
