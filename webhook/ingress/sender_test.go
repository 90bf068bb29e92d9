package ingress

import (
	"testing"

	"github.com/olp-edu/borda/webhook/envelope"
)

// TestEnvelopeNamesTheSenderOfItsCredential (fresh attack pass 11, A06):
// the ingress, which holds the credentials' values, writes each source's
// credential group into the envelope, so the forwarder needs none of them
// to tell two sources sharing a token from two senders; a source without
// one names itself.
func TestEnvelopeNamesTheSenderOfItsCredential(t *testing.T) {
	t.Parallel()
	o := flatOptions("test-token")
	o.Sources[0].Sender = "whatsapp"
	o.addSources(Source{Name: "zap", Path: "/webhooks/zap", Tokens: []string{"test-token"}, Sender: "whatsapp"},
		Source{Name: "own", Path: "/webhooks/own", Tokens: []string{"own-token"}})
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, o, pub)
	for _, c := range []struct{ path, token, want string }{
		{"/webhooks/whatsapp", "test-token", "whatsapp"},
		{"/webhooks/zap", "test-token", "whatsapp"},
		{"/webhooks/own", "own-token", "own"},
	} {
		before := len(pub.messages())
		expect(t, req{target: c.path, body: `{"a":"` + c.path + `"}`, headers: map[string]string{"Authorization": "Bearer " + c.token}}.do(i), 200, StatusPublishedConfirmed)
		msgs := pub.messages()
		if len(msgs) != before+1 {
			t.Fatalf("%s: %d messages, want %d", c.path, len(msgs), before+1)
		}
		env, err := envelope.Decode(msgs[len(msgs)-1].Body)
		if err != nil {
			t.Fatal(err)
		}
		if env.Sender != c.want {
			t.Errorf("%s: envelope sender %q, want %q", c.path, env.Sender, c.want)
		}
	}
}
