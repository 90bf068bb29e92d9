package ingress

import (
	"net/http"
	"testing"

	"github.com/olp-edu/borda/webhook/envelope"
)

// TestRedactingSourceMarksOnlyWhatItRemoved: a source that redacts
// fields, given a body without them, publishes the body as it came and
// an envelope that claims no redaction (no names, no original digest).
func TestRedactingSourceMarksOnlyWhatItRemoved(t *testing.T) {
	o := unitConfig()
	o.Sources[0].RedactFields = []string{"apikey"}
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, o, pub)
	body := `{"event":"x","data":{"apikey":"nested, not top-level"}}`
	expect(t, req{target: "/webhooks/whatsapp", body: body, headers: bearer("test-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
	msgs := pub.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	env, err := envelope.Decode(msgs[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(env.Body) != body || env.Redacted != nil || env.OriginalSHA256 != "" {
		t.Errorf("envelope body %s, redacted %v, original digest %q; want the body as sent and no redaction claimed", env.Body, env.Redacted, env.OriginalSHA256)
	}
}
