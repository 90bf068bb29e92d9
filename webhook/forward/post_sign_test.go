package forward

import (
	"net/http"
	"testing"
	"time"

	"github.com/olp-edu/borda/webhook/envelope"
)

// TestPostSignatureVersions: by default a POST carries both signatures
// (existing v1 receivers keep working), each checked by an independent
// receiver (legacyVerify); SignatureVersions [v2] drops v1, [v1] drops v2;
// and v2 no longer matches once Idempotency-Key or Content-Type is
// changed on the captured request, where v1 still does (why v2 exists).
func TestPostSignatureVersions(t *testing.T) {
	t.Parallel()
	env := envelope.Envelope{ID: "evt-1", ContentType: "application/json", Body: []byte(`{"a":1}`)}
	now := time.Unix(1767225600, 0)
	for _, tc := range []struct {
		versions []string
		v1, v2   bool
	}{
		{nil, true, true},
		{[]string{SignatureV1, SignatureV2}, true, true},
		{[]string{SignatureV2}, false, true},
		{[]string{SignatureV1}, true, false},
	} {
		p := newPoster(http.DefaultClient, Options{HMACSecret: []byte(testSecret), SignatureVersions: tc.versions})
		h := p.headers(env, now)
		if got := h.Get(HeaderSignature) != ""; got != tc.v1 {
			t.Errorf("versions %v: v1 sent = %v, want %v", tc.versions, got, tc.v1)
		}
		if got := h.Get(HeaderSignatureV2) != ""; got != tc.v2 {
			t.Errorf("versions %v: v2 sent = %v, want %v", tc.versions, got, tc.v2)
		}
		if err := legacyVerify(h, env.Body, []byte(testSecret)); err != "" {
			t.Errorf("versions %v: independent receiver: %s", tc.versions, err)
		}
		if !tc.v2 {
			continue
		}
		for _, change := range []struct{ name, value string }{{HeaderIdempotencyKey, "replayed-1"}, {"Content-Type", "text/plain"}} {
			replayed := h.Clone()
			replayed.Set(change.name, change.value)
			replayed.Del(HeaderSignature)
			if legacyVerify(replayed, env.Body, []byte(testSecret)) == "" {
				t.Errorf("versions %v: v2 still verifies with %s changed", tc.versions, change.name)
			}
		}
	}
	if validVersions([]string{"v3"}) {
		t.Error("v3 is not a signature version")
	}
}

// X-Borda-Source names the event's source when it has one; an envelope
// without one (an earlier release's) sends no such header rather than an
// empty one.
func TestPostNamesTheSourceOnlyWhenThereIsOne(t *testing.T) {
	t.Parallel()
	p := newPoster(http.DefaultClient, Options{HMACSecret: []byte(testSecret)})
	now := time.Unix(1767225600, 0)
	h := p.headers(envelope.Envelope{ID: "evt-1", Source: "zapster", Body: []byte(`{}`)}, now)
	if got := h.Values("X-Borda-Source"); len(got) != 1 || got[0] != "zapster" {
		t.Errorf("X-Borda-Source = %q, want [zapster]", got)
	}
	h = p.headers(envelope.Envelope{ID: "evt-1", Body: []byte(`{}`)}, now)
	if got, ok := h["X-Borda-Source"]; ok {
		t.Errorf("X-Borda-Source sent for an event without a source: %q", got)
	}
}

// validFieldValue follows RFC 9110 §5.5 at each edge: a space and a tab
// are allowed, every other control byte and DEL are not, obs-text is.
func TestValidFieldValueEdges(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"a b": true, "a\tb": true, "~": true, "caf\xc3\xa9": true, "": true,
		"\x1f": false, "a\x00": false, "\r\n": false, "\x7f": false,
	} {
		if got := validFieldValue(v); got != want {
			t.Errorf("validFieldValue(%q) = %v, want %v", v, got, want)
		}
	}
}
