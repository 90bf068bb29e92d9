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
	"mime"
	"net/url"
	"strings"
	"time"
)

// EventConnectionUpdate is the normalized name of Evolution's
// connection.update event (also sent as CONNECTION_UPDATE).
const EventConnectionUpdate = "connection.update"

// ErrMalformed: a connection.update event without an instance, a state or
// a parsable date_time.
var ErrMalformed = errors.New("instances: malformed connection.update")

// Update is one instance's state change.
type Update struct {
	Instance string
	// State is Evolution's state: open, connecting or close.
	State string
	// Reason is the statusReason (an HTTP-like code, 401 on logout); nil
	// when absent.
	Reason *int
	// EventTime is the event's date_time (Evolution sends the server's local
	// time with a "Z"; it is used only to order one instance's events).
	EventTime time.Time
}

// evolutionEvent is the part of an Evolution API v2 webhook body read here.
type evolutionEvent struct {
	Event    string `json:"event"`
	Instance string `json:"instance"`
	Data     struct {
		Instance     string          `json:"instance"`
		State        string          `json:"state"`
		StatusReason json.RawMessage `json:"statusReason"`
	} `json:"data"`
	DateTime string `json:"date_time"`
}

// Parse reads a webhook body (JSON, or form-urlencoded with the JSON in
// its payload field) and returns its connection update. ok is false for
// any other event; err wraps ErrMalformed when it is a connection.update
// that cannot be applied.
func Parse(contentType string, body []byte) (u Update, ok bool, err error) {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		vals, err := url.ParseQuery(string(body))
		if err != nil || vals.Get("payload") == "" {
			return Update{}, false, nil
		}
		body = []byte(vals.Get("payload"))
	}
	var ev evolutionEvent
	if err := json.Unmarshal(body, &ev); err != nil {
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
	if u.EventTime, err = time.Parse(time.RFC3339Nano, ev.DateTime); err != nil {
		return Update{}, true, fmt.Errorf("%w: date_time %q", ErrMalformed, ev.DateTime)
	}
	var reason int
	if len(ev.Data.StatusReason) > 0 && json.Unmarshal(ev.Data.StatusReason, &reason) == nil {
		u.Reason = &reason
	}
	return u, true, nil
}

// normalizeEvent maps CONNECTION_UPDATE and connection.update alike.
func normalizeEvent(e string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(e)), "_", ".")
}
