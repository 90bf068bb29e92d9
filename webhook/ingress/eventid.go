package ingress

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// deliveryIDHeaders carry a provider's own delivery id, in the order they
// are believed (docs/webhooks.md §4).
// They are in canonical form (http.CanonicalHeaderKey), so Get finds
// them without canonicalising, and allocating, each name per event
// (TestDeliveryIDHeadersAreCanonical).
var deliveryIDHeaders = []string{"Webhook-Id", "X-Github-Delivery", "Idempotency-Key"}

// maxIDLen bounds an event id taken from a header or the body; a longer
// one is derived (safeID). AMQP message_id is a short string.
const maxIDLen = 200

// derivedIDPrefix starts an id derived from an unsafe one: "sha256:" and
// the lower-case hex SHA-256 of the raw id bytes (71 characters).
const derivedIDPrefix = "sha256:"

// eventID returns the event's identity: a delivery-id header when present,
// else the values of fields (dotted paths into a JSON object body) joined
// with ":" when every one is a present scalar, else the lower-case hex
// SHA-256 of the raw body. isJSON says whether body is JSON. A header or
// body id is used as it is only when safeID holds; otherwise it is
// replaced by derivedIDPrefix + hex SHA-256 of its exact bytes (JSON
// escapes decoded losslessly, see jsonString), so the id is always a
// valid Idempotency-Key header value, a plain Redis key and a line a
// terminal prints verbatim, and two deliveries of the same hostile id
// still dedup to one (docs/webhooks.md §4).
func eventID(h http.Header, body []byte, isJSON bool, fields [][]string) string {
	return eventIDOf(deliveryIDHeaders, nil, h, body, isJSON, fields)
}

// signedIDHeaders are the delivery-id headers a signature scheme covers,
// the only ones believed on a source that verifies it: a replayer can set
// any other header on a captured delivery, and each new value would be a
// new event (issue 22 item 6). Standard Webhooks signs webhook-id; Stripe
// and GitHub sign the body only (X-GitHub-Delivery is not covered).
var signedIDHeaders = map[string][]string{
	"standard": {"Webhook-Id"},
	"stripe":   nil,
	"github":   nil,
}

// signedFallbackFields are body paths tried after a signed source's
// id_fields: Stripe's event object carries its id ("evt_…") at the top.
var signedFallbackFields = map[string][][]string{
	"stripe": {{"id"}},
}

// idOf is the event id of a request to src. isJSON is whether the body is
// read as JSON (bodyIsJSON: the bytes decide, never an unsigned header
// alone).
//
// A signed source takes it from signed material only (the signed id
// header, then the body): a replayer of a captured delivery controls
// every other header (issue 22 item 6, attack B03).
//
// A token-only source takes eventID's order, but an id the client names
// (a delivery-id header or id_fields) is a claim, not a proof: every
// holder of the source's token can send any id, so it is bound to the
// body (bindBody). The same id with the same bytes (a provider's retry)
// is one event; the same id with other bytes is another event, never a
// duplicate silently dropped (attack B13).
func (src *source) idOf(h http.Header, body []byte, isJSON bool) string {
	if src.sig != nil {
		return eventIDOf(src.idHeaders, src.idFallback, h, body, isJSON, src.idFields)
	}
	id, claimed := eventIDClaim(deliveryIDHeaders, nil, h, body, isJSON, src.idFields)
	if !claimed {
		return id
	}
	return bindBody(id, body)
}

// bodyBindLen is how many hex digits of the body's SHA-256 bindBody
// appends: 64 bits, so pre-empting an id means finding a second body
// whose digest shares them (a 2^64 second-preimage search).
const bodyBindLen = 16

// bindBody is a token source's claimed id bound to the body it came
// with: id + "~" + the first bodyBindLen hex digits of the body's
// SHA-256 ("k-9~ab12…"). The claimed part stays readable for operators
// and receivers; a result longer than maxIDLen is derived (bounded), so
// it is always safeID.
func bindBody(id string, body []byte) string {
	return bounded(id + "~" + digestHex(body)[:bodyBindLen])
}

// eventIDOf is eventID with its delivery-id headers, and the body paths
// tried when fields do not resolve (one path each), given.
func eventIDOf(headers []string, fallback [][]string, h http.Header, body []byte, isJSON bool, fields [][]string) string {
	id, _ := eventIDClaim(headers, fallback, h, body, isJSON, fields)
	return id
}

// eventIDClaim is eventIDOf, and whether the id was named by the request
// (a header or a body member) rather than being the body's digest.
func eventIDClaim(headers []string, fallback [][]string, h http.Header, body []byte, isJSON bool, fields [][]string) (string, bool) {
	for _, name := range headers {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return bounded(v), true
		}
	}
	if isJSON {
		if len(fields) > 0 {
			if v, ok := fieldsID(body, fields); ok {
				return bounded(v), true
			}
		}
		for _, path := range fallback {
			if v, ok := lookupScalar(body, path); ok {
				return bounded(v), true
			}
		}
	}
	return digestHex(body), false
}

// safeID reports whether a provider's id can be the event id as it is:
// 1 to maxIDLen bytes of printable ASCII (0x20-0x7E: no C0/C1 control, no
// DEL, no byte >= 0x80 so no invalid UTF-8 and no Unicode look-alike),
// not starting or ending with a space (HTTP trims those from a header
// value, so the receiver would see another key).
func safeID(id string) bool {
	if id == "" || len(id) > maxIDLen || id[0] == ' ' || id[len(id)-1] == ' ' {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
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
		vals = append(vals, joinEscaper.Replace(v))
	}
	return strings.Join(vals, ":"), true
}

// joinEscaper escapes '%' and ':' in one field's value before the join,
// so the joined id is unambiguous: ("a:b", "c") and ("a", "b:c") were both
// "a:b:c", and the second of two real events was answered 200 and dropped
// as a duplicate. A value holding neither (the common case) joins as it
// always did, so ids already in dedup windows keep deduplicating.
var joinEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

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

// bounded returns id when safeID holds, else its derived form.
func bounded(id string) string {
	if safeID(id) {
		return id
	}
	return derivedIDPrefix + digestHex([]byte(id))
}

func digestHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
