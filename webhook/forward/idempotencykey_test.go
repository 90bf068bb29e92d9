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
		Scrub: func(s string) string { return s }, BareKeySource: "whatsapp", Sources: []string{"whatsapp", "zapster", "standard", "github"}})
	hostile := "id\r\nX: y"
	for _, tc := range []struct{ source, id, want string }{
		{"whatsapp", "msg_1", "msg_1"},
		{"", "msg_1", "msg_1"},
		{"zapster", "msg_1", "zapster:msg_1"},
		{"standard", "msg_1", "standard:msg_1"},
		{"zapster", hostile, IdempotencyKey("zapster:" + hostile)},
		// A bare id that reads as another source's key is qualified:
		// an Evolution instance named "zapster" cannot mint zapster's key.
		{"whatsapp", "zapster:evil:M77", "whatsapp:zapster:evil:M77"},
		{"whatsapp", "whatsapp:x", "whatsapp:whatsapp:x"},
		{"whatsapp", "inst-1:ABC", "inst-1:ABC"}, // an instance named like no source stays bare
		{"zapster", "evil:M77", "zapster:evil:M77"},
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

// The invariant behind the table: over generated (source, id) pairs, the
// keys of two different pairs never meet, whatever ids the senders pick.
func TestIdempotencyKeysOfDistinctPairsNeverMeet(t *testing.T) {
	sources := []string{"whatsapp", "zapster", "standard", "github"}
	p := newPoster(nil, Options{URL: "http://legacy.invalid/", HMACSecret: []byte("s"), Timeout: time.Second,
		Scrub: func(s string) string { return s }, BareKeySource: "whatsapp", Sources: sources})
	pieces := []string{"", "zapster", "whatsapp", "github", "M77", "evil", ":", "inst", "a:b", "sha256-x"}
	seen := map[string][2]string{}
	for _, src := range append(sources, "") {
		for _, a := range pieces {
			for _, b := range pieces {
				for _, sep := range []string{"", ":"} {
					id := a + sep + b
					if id == "" {
						continue
					}
					k := p.idempotencyKey(envelope.Envelope{Source: src, ID: id})
					pair := [2]string{src, id}
					if src == "" {
						pair[0] = "whatsapp" // an envelope without a source is the flat source's
					}
					if prev, ok := seen[k]; ok && prev != pair {
						t.Fatalf("pairs %q and %q share the key %q", prev, pair, k)
					}
					seen[k] = pair
				}
			}
		}
	}
}
