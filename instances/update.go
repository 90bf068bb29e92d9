// Package instances implements `borda consume-events` (docs/forwarder.md, "`borda consume-events`"): it
// reads every WhatsApp event from the events queue and keeps PostgreSQL
// whatsapp_instances current from Evolution API connection.update events.
// Events arrive out of order (redeliveries, retries, several ingress
// replicas), so the upsert is conditional on the event's own time: an event
// older than the stored one never overwrites it, and is counted as skipped.
package instances

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// EventConnectionUpdate is the normalized name of Evolution's
// connection.update event (also sent as CONNECTION_UPDATE).
const EventConnectionUpdate = "connection.update"

// ErrMalformed: a connection.update event without an instance, a state or
// a parsable date_time, or with a value whatsapp_instances cannot hold
// (Update's field docs give each bound).
var ErrMalformed = errors.New("instances: malformed connection.update")

// Bounds of the text columns of whatsapp_instances as this package writes
// them, in bytes. Evolution's instance names and states are short; a
// longer value is a sender's mistake or an attack, and an index entry is
// no place for it.
const (
	maxInstanceLen = 256
	maxStateLen    = 64
)

// Update is one instance's state change.
type Update struct {
	// Instance is the instance's name: valid UTF-8 without NUL (PostgreSQL
	// text refuses NUL), 1-256 bytes.
	Instance string
	// State is Evolution's state (open, connecting or close): valid UTF-8
	// without NUL, 1-64 bytes.
	State string
	// Reason is the statusReason (an HTTP-like code, 401 on logout); nil
	// when absent, not an integer, or outside PostgreSQL's integer (int32).
	Reason *int
	// EventTime is the event's date_time (Evolution sends the server's local
	// time with a "Z"; it is used only to order one instance's events).
	EventTime time.Time
}

// evolutionEvent is the part of an Evolution API v2 webhook body read here.
type evolutionEvent struct {
	Event    string
	Instance string
	Data     struct {
		Instance     string
		State        string
		StatusReason json.RawMessage
	}
	DateTime string
}

// decodeEvent reads body's members by their exact names (RFC 8259: names
// are case-sensitive), a repeated name's last value winning, as PHP,
// Python, JavaScript and PostgreSQL read them. encoding/json's struct
// decoding would also match "Instance", "EVENT" or "ſtate" (U+017F) to the
// fields, so the legacy system and this table could read one event two
// ways (fresh attack pass A34; the ingress refuses such bodies too).
func decodeEvent(body []byte) (ev evolutionEvent, err error) {
	top, err := objectMembers(body)
	if err != nil {
		return ev, err
	}
	for name, dst := range map[string]*string{"event": &ev.Event, "instance": &ev.Instance, "date_time": &ev.DateTime} {
		if *dst, err = stringMember(top, name); err != nil {
			return ev, err
		}
	}
	if raw, ok := top["data"]; ok && string(raw) != "null" {
		data, err := objectMembers(raw)
		if err != nil {
			return ev, err
		}
		if ev.Data.Instance, err = stringMember(data, "instance"); err != nil {
			return ev, err
		}
		if ev.Data.State, err = stringMember(data, "state"); err != nil {
			return ev, err
		}
		ev.Data.StatusReason = data["statusReason"]
	}
	return ev, nil
}

// objectMembers decodes a JSON object into its members by exact name.
func objectMembers(raw []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not an object")
	}
	return m, nil
}

// stringMember is m's member name as a string: "" when absent or null, an
// error when it is not a string.
func stringMember(m map[string]json.RawMessage, name string) (string, error) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// Parse reads a webhook body (JSON, or form-urlencoded with the JSON in
// its payload field) and returns its connection update. ok is false for
// any other event; err wraps ErrMalformed when it is a connection.update
// that cannot be applied. Member names are read exactly (decodeEvent).
func Parse(contentType string, body []byte) (u Update, ok bool, err error) {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		vals, err := url.ParseQuery(string(body))
		if err != nil || vals.Get("payload") == "" {
			return Update{}, false, nil
		}
		body = []byte(vals.Get("payload"))
	}
	ev, err := decodeEvent(body)
	if err != nil {
		return Update{}, false, nil // not an event of ours
	}
	if normalizeEvent(ev.Event) != EventConnectionUpdate {
		return Update{}, false, nil
	}
	u = Update{Instance: ev.Instance, State: ev.Data.State}
	if u.Instance == "" {
		u.Instance = ev.Data.Instance
	}
	if u.Instance == "" || u.State == "" {
		return Update{}, true, fmt.Errorf("%w: no instance or state", ErrMalformed)
	}
	if err := storableText("instance", u.Instance, maxInstanceLen); err != nil {
		return Update{}, true, err
	}
	if err := storableText("state", u.State, maxStateLen); err != nil {
		return Update{}, true, err
	}
	if u.EventTime, err = time.Parse(time.RFC3339Nano, ev.DateTime); err != nil {
		return Update{}, true, fmt.Errorf("%w: date_time %q", ErrMalformed, ev.DateTime)
	}
	var reason int64
	if len(ev.Data.StatusReason) > 0 && json.Unmarshal(ev.Data.StatusReason, &reason) == nil &&
		reason >= math.MinInt32 && reason <= math.MaxInt32 {
		r := int(reason)
		u.Reason = &r
	}
	return u, true, nil
}

// storableText checks a value for a text column: valid UTF-8, no NUL, at
// most max bytes; the error wraps ErrMalformed and quotes at most 64
// bytes of the value.
func storableText(field, v string, max int) error {
	switch {
	case len(v) > max:
		return fmt.Errorf("%w: %s is %d bytes (at most %d)", ErrMalformed, field, len(v), max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrMalformed, field)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s holds a NUL character", ErrMalformed, field)
	}
	return nil
}

// normalizeEvent maps CONNECTION_UPDATE and connection.update alike.
func normalizeEvent(e string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(e)), "_", ".")
}
