package ingress

import (
	"net/http"
	"testing"
	"time"

	"github.com/olp-edu/borda/webhook/publish"
)

// signedDeliveries are captured deliveries of each signature scheme, their
// signatures computed outside the code (the openssl command beside each)
// at unix time 1767225600, and the event id each must get.
var signedDeliveries = []struct {
	scheme, secret, path, body string
	headers                    map[string]string
	wantID                     string
}{
	{
		"github", "gh-secret", "/webhooks/github", `{"action":"opened","number":1}`,
		// printf '%s' '{"action":"opened","number":1}' | openssl dgst -sha256 -hmac gh-secret
		map[string]string{"X-Hub-Signature-256": "sha256=edda432d7db8ba7a6ff81ad90652d6c5fccbff5e0d8d044873c8684654ef1b42", "X-GitHub-Delivery": "d-1"},
		// X-GitHub-Delivery is not signed: the body's digest,
		// printf '%s' '{"action":"opened","number":1}' | sha256sum
		"fe0e7604531e0d90c365a756878c17f6266c65c90f1373f89b740cb192b8e373",
	},
	{
		"stripe", "sk-secret", "/webhooks/stripe", `{"id":"evt_1","type":"charge.succeeded"}`,
		// printf '%s' '1767225600.{"id":"evt_1","type":"charge.succeeded"}' | openssl dgst -sha256 -hmac sk-secret
		map[string]string{"Stripe-Signature": "t=1767225600,v1=e8d61bb147e804e72bae344ac83365d737d448256f901d668b8fda72d5f5061c", "Idempotency-Key": "k-1"},
		"evt_1", // the signed body's id
	},
	{
		"standard", "whsec_c3RkLWtleS0wMTIzNDU2Nzg5", "/webhooks/standard", `{"type":"user.created"}`,
		// printf '%s' 'msg_1.1767225600.{"type":"user.created"}' | openssl dgst -sha256 -mac HMAC \
		//   -macopt hexkey:$(printf std-key-0123456789 | xxd -p) -binary | base64
		map[string]string{"Webhook-Id": "msg_1", "Webhook-Timestamp": "1767225600",
			"Webhook-Signature": "v1,0KH9c1kMJxoTz2Oe1FK9TRZ7EURhMXNlxUY9uVZqd24=", "Idempotency-Key": "k-1"},
		"msg_1", // webhook-id is signed
	},
}

// TestSignedSourceEventIDFromSignedMaterialOnly: a captured signed
// delivery replayed with a new unsigned Idempotency-Key or
// X-GitHub-Delivery is the same event (ALREADY_PROCESSED, one message),
// for every signature scheme; the id is the one pinned above.
func TestSignedSourceEventIDFromSignedMaterialOnly(t *testing.T) {
	t.Parallel()
	for _, d := range signedDeliveries {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			o := defaultOptions()
			o.Sources = []Source{{Name: d.scheme, Path: d.path, IDFields: defaultIDFields,
				Signature: &Signature{Scheme: d.scheme, Secrets: []string{d.secret}, Tolerance: 5 * time.Minute}}}
			pub := &fakePublisher{}
			i, _ := newUnitIngress(t, o, pub)
			i.now = func() time.Time { return time.Unix(1767225600, 0) }
			expect(t, req{target: d.path, body: d.body, headers: d.headers}.do(i), http.StatusOK, StatusPublishedConfirmed)
			for _, replay := range []map[string]string{
				{"Idempotency-Key": "replay-2"},
				{"X-GitHub-Delivery": "replay-3"},
				{"Idempotency-Key": "replay-4", "X-GitHub-Delivery": "replay-4"},
			} {
				h := map[string]string{}
				for k, v := range d.headers {
					h[k] = v
				}
				for k, v := range replay {
					h[k] = v
				}
				expect(t, req{target: d.path, body: d.body, headers: h}.do(i), http.StatusOK, StatusAlreadyProcessed)
			}
			msgs := pub.messages()
			if len(msgs) != 1 || msgs[0].ID != d.wantID {
				t.Fatalf("published %d messages, first id %q; want one with id %q", len(msgs), firstID(msgs), d.wantID)
			}
		})
	}
}

// TestUnsignedSourceKeepsDeliveryIDHeaders: a token source (no signature)
// keeps reading the delivery-id headers (docs/webhooks.md §4), bound to
// the body: "k-9~" and the first 16 hex digits of
// printf '%s' '{"a":1}' | sha256sum   (015abd7f5cc57a2d…).
func TestUnsignedSourceKeepsDeliveryIDHeaders(t *testing.T) {
	t.Parallel()
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	h := bearer("test-token")
	h["Idempotency-Key"] = "k-9"
	expect(t, req{target: "/webhooks/whatsapp", body: `{"a":1}`, headers: h}.do(i), http.StatusOK, StatusPublishedConfirmed)
	if msgs := pub.messages(); len(msgs) != 1 || msgs[0].ID != "k-9~015abd7f5cc57a2d" {
		t.Fatalf("id %q, want k-9~015abd7f5cc57a2d", firstID(msgs))
	}
}

func firstID(msgs []publish.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[0].ID
}
