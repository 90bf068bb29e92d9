package deadletter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/webhook/envelope"
)

// ErrNotFound is returned by Show when no dead letter in the pass has the
// event id.
var ErrNotFound = errors.New("no dead letter with that event id")

// PreviewBytes bounds Entry.Preview.
const PreviewBytes = 512

// Entry is one dead letter in full, for `borda dlq show`: its Letter, the
// AMQP message's properties and every header (x-death included), and a
// redacted preview of the event's body.
type Entry struct {
	Letter
	ContentType, ContentEncoding, Type, AppID string
	// Timestamp is the message's timestamp property (zero when unset).
	Timestamp time.Time
	// Headers are the message's headers as the broker holds them.
	Headers amqp.Table
	// MessageBytes is the size of the message body (the envelope).
	MessageBytes int
	// Event, ReceivedContentType, ReceivedHeaders, SHA256 and BodyBytes
	// come from the envelope (zero when the body is not one): the event
	// name from the URL, the provider's Content-Type and allowlisted
	// headers, the body's digest and size.
	Event               string
	ReceivedContentType string
	ReceivedHeaders     map[string]string
	SHA256              string
	BodyBytes           int
	// Preview is the event's body as Preview renders it.
	Preview string
}

// ListEntries is List with every letter in full (Entry): up to limit dead
// letters of queue (0: DefaultLimit), oldest first by DeadLetteredAt,
// every one kept in the queue as List keeps them. The operator page
// (docs/operations.md) lists with it.
func ListEntries(ctx context.Context, conn *amqp.Connection, pub Republisher, queue string, limit int) ([]Entry, error) {
	var out []Entry
	err := readKept(ctx, conn, pub, queue, limit, func(d amqp.Delivery) { out = append(out, entryOf(FromDelivery(d), d)) })
	slices.SortStableFunc(out, func(a, b Entry) int { return a.DeadLetteredAt.Compare(b.DeadLetteredAt) })
	return out, err
}

// Show reads the dead letters of queue in one pass (at most limit; 0:
// DefaultLimit) and returns the ones whose event id is id (or whose Printed id is id,
// SameID), in full. Like
// List it keeps every message it read in the queue (putBack: no delivery
// spent), the one shown included. A letter in the DLQ twice (a process
// that died between a put-back's confirm and its ack) is returned twice.
// With none matching, the error is ErrNotFound.
func Show(ctx context.Context, conn *amqp.Connection, pub Republisher, queue, id string, limit int) ([]Entry, error) {
	var out []Entry
	err := readKept(ctx, conn, pub, queue, limit, func(d amqp.Delivery) {
		if l := FromDelivery(d); SameID(l.ID, id) {
			out = append(out, entryOf(l, d))
		}
	})
	if err == nil && len(out) == 0 {
		err = ErrNotFound
	}
	return out, err
}

// readKept is one pass over queue that keeps every message: each delivery
// read is handed to seen, then put back (putBack). The errors of the pass
// and of every put-back are joined. conn reads the queue; pub puts the
// letters back.
func readKept(ctx context.Context, conn *amqp.Connection, pub Republisher, queue string, limit int, seen func(amqp.Delivery)) error {
	if err := canPutBack(ctx, pub); err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening channel: %w", err)
	}
	defer ch.Close()
	got, err := pass(ctx, ch, queue, limit)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, d := range got {
		seen(d)
		if perr := putBack(ctx, pub, queue, d); perr != nil {
			errs = append(errs, perr)
		}
	}
	return errors.Join(errs...)
}

func entryOf(l Letter, d amqp.Delivery) Entry {
	e := Entry{
		Letter: l, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, Type: d.Type, AppID: d.AppId,
		Timestamp: d.Timestamp, Headers: d.Headers, MessageBytes: len(d.Body),
	}
	env, err := envelope.Decode(d.Body)
	if err != nil {
		e.Preview = fmt.Sprintf("(not an envelope: %v)", err)
		return e
	}
	e.Event, e.ReceivedContentType, e.ReceivedHeaders = env.Event, env.ContentType, env.Headers
	e.SHA256, e.BodyBytes = env.SHA256, len(env.Body)
	e.Preview = Preview(env.Body, PreviewBytes)
	return e
}

// secretish are the parts of a JSON member name whose value Preview
// replaces with "[redacted]", compared case-insensitively with '_' and
// '-' removed: credentials the providers put in their bodies (Evolution
// sends its apikey), WhatsApp's media decryption keys, and media payloads
// (base64, thumbnails) that are noise on an operator's screen.
var secretish = []string{"token", "secret", "password", "passwd", "apikey", "authorization", "signature", "cookie", "jwt", "mediakey", "base64", "jpegthumbnail"}

// Preview renders an event body for an operator's eyes: a JSON body
// compacted, with the value of every member whose name holds a secret's
// word (token, secret, password, apikey, authorization, signature, cookie,
// jwt; any case, at any depth) replaced by "[redacted]", and URL passwords
// and query values masked (redact.URLs); cut to at most max bytes
// at a rune boundary, "…" marking the cut. A body that is not JSON is
// not shown: "(N bytes, not JSON)".
func Preview(body []byte, max int) string {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Sprintf("(%d bytes, not JSON)", len(body))
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(redactSecrets(v)); err != nil {
		return fmt.Sprintf("(%d bytes, not shown: %v)", len(body), err)
	}
	s := escapeUnprintable(redact.URLs(strings.TrimSuffix(out.String(), "\n")))
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// escapeUnprintable writes every rune of the JSON text s that is not
// printable (unicode.IsPrint: bidi overrides and isolates, zero-width
// and other format characters, line and paragraph separators) as a JSON
// \uXXXX escape (a surrogate pair past U+FFFF), so the preview reads the
// same and its text cannot be reordered or hidden on an operator's page
// or terminal (fresh attack pass 19 A35: U+202E reversed what followed
// it). Such runes only occur inside JSON strings, where the escape is
// the same value.
func escapeUnprintable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

func redactSecrets(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if isSecretish(k) {
				x[k] = "[redacted]"
				continue
			}
			x[k] = redactSecrets(val)
		}
	case []any:
		for i := range x {
			x[i] = redactSecrets(x[i])
		}
	}
	return v
}

func isSecretish(name string) bool {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(name))
	for _, w := range secretish {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
