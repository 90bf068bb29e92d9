package forward

import (
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/webhook/envelope"
)

// Two sources sharing an event id never share the POST's Idempotency-Key
// (a receiver deduplicating by it would drop one acknowledged event); the
// bare-key source keeps the bare id its receiver already deduplicates by.
func TestIdempotencyKeyNamesEverySourceButTheBareOne(t *testing.T) {
	p := newPoster(nil, Options{URL: "http://legacy.invalid/", HMACSecret: []byte("s"), Timeout: time.Second,
		Scrub: func(s string) string { return s }, BareKeySource: "whatsapp"})
	hostile := "id\r\nX: y"
	for _, tc := range []struct{ source, id, want string }{
		{"whatsapp", "msg_1", "msg_1"},
		{"", "msg_1", "msg_1"},
		{"zapster", "msg_1", "zapster:msg_1"},
		{"standard", "msg_1", "standard:msg_1"},
		{"zapster", hostile, IdempotencyKey("zapster:" + hostile)},
	} {
		got := p.headers(envelope.Envelope{Source: tc.source, ID: tc.id, Body: []byte("{}")}, time.Unix(1_800_000_000, 0)).Get(HeaderIdempotencyKey)
		if got != tc.want {
			t.Errorf("source %q id %q: Idempotency-Key %q, want %q", tc.source, tc.id, got, tc.want)
		}
		if strings.ContainsAny(got, "\r\n") {
			t.Errorf("an unsafe key %q", got)
		}
	}
	seen := map[string]string{}
	for _, src := range []string{"whatsapp", "zapster", "standard", "github"} {
		k := p.idempotencyKey(envelope.Envelope{Source: src, ID: "same"})
		if other, dup := seen[k]; dup {
			t.Errorf("sources %s and %s share the key %q", src, other, k)
		}
		seen[k] = src
	}
}
