package ingress

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/olp-edu/borda/webhook/envelope"
)

// Evolution drops an event for good on 401: every accepted credential form
// has a test here, and every refusal a reason.
func TestCredentialForms(t *testing.T) {
	const base = "/webhooks/whatsapp"
	tests := []struct {
		name    string
		target  string
		headers map[string]string
		code    int
		event   string
	}{
		{"bearer", base, bearer("test-token"), 200, ""},
		{"bearer lower-case scheme", base, map[string]string{"Authorization": "bearer test-token"}, 200, ""},
		{"rotation: second token", base, bearer("next-token"), 200, ""},
		{"X-Webhook-Token", base, map[string]string{"X-Webhook-Token": "test-token"}, 200, ""},
		{"apikey header", base, map[string]string{"apikey": "test-token"}, 200, ""},
		{"query token", base + "?token=test-token", nil, 200, ""},
		{"query token + Evolution's /{event}", base + "?token=test-token/messages-upsert", nil, 200, "messages-upsert"},
		{"path token", base + "/t/test-token", nil, 200, ""},
		{"path token + event", base + "/t/test-token/messages-upsert", nil, 200, "messages-upsert"},
		{"sub-path event with bearer", base + "/connection-update", bearer("test-token"), 200, "connection-update"},
		{"same value twice is fine", base + "?token=test-token", bearer("test-token"), 200, ""},

		{"no credential", base, nil, 401, ""},
		{"wrong bearer", base, bearer("test-tokenx"), 401, ""},
		{"wrong query token", base + "?token=nope/messages-upsert", nil, 401, ""},
		{"wrong path token", base + "/t/nope", nil, 401, ""},
		{"basic auth is not a credential", base, map[string]string{"Authorization": "Basic dGVzdC10b2tlbg=="}, 401, ""},
		{"bearer and header disagree", base, map[string]string{"Authorization": "Bearer test-token", "X-Webhook-Token": "next-token"}, 401, ""},
		{"header right, URL wrong", base + "?token=nope", map[string]string{"X-Webhook-Token": "test-token"}, 401, ""},
		{"path and query disagree", base + "/t/test-token?token=next-token", nil, 401, ""},
		{"empty bearer", base, map[string]string{"Authorization": "Bearer "}, 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := &fakePublisher{}
			i, _ := newUnitIngress(t, unitConfig(), pub)
			w := req{target: tt.target, headers: tt.headers, body: `{"a":1}`}.do(i)
			if w.Code != tt.code {
				t.Fatalf("code = %d %s, want %d", w.Code, w.Body.String(), tt.code)
			}
			if tt.code != 200 {
				return
			}
			env, err := envelope.Decode(pub.messages()[0].Body)
			if err != nil {
				t.Fatal(err)
			}
			if env.Event != tt.event {
				t.Errorf("event = %q, want %q", env.Event, tt.event)
			}
		})
	}
}

// The body's apikey is the provider instance's own token, never a
// credential of ours.
func TestBodyAPIKeyIsNotACredential(t *testing.T) {
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	w := req{target: "/webhooks/whatsapp", body: `{"apikey":"test-token"}`}.do(i)
	expect(t, w, 401, StatusUnauthorized)
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		rest, query      string
		path, tok, event string
		hasQuery         bool
	}{
		{"", "", "", "", "", false},
		{"/messages-upsert", "", "", "", "messages-upsert", false},
		{"/t/abc", "", "abc", "", "", false},
		{"/t/abc/send-message", "", "abc", "", "send-message", false},
		{"", "token=abc/messages-upsert", "", "abc", "messages-upsert", true},
		{"", "token=abc&x=1/qrcode-updated", "", "abc", "qrcode-updated", true},
		{"", "token=a%2Bb", "", "a+b", "", true},
		// A literal "+" is part of the token (base64 alphabets have one); a
		// form decoder turned it into a space and every delivery got 401.
		{"", "token=a+b/messages-upsert", "", "a+b", "messages-upsert", true},
		{"", "x=1&token=abc", "", "abc", "", true},
		{"/a/b", "", "", "", "b", false},
		// A URL configured with an empty query ("…/evo?") gets the event
		// appended right after the "?": the query is just "/{event}".
		{"", "/messages-upsert", "", "", "messages-upsert", false},
		{"/t/abc", "/connection-update", "abc", "", "connection-update", false},
		// An unset token variable ("?token=" + "/{event}"): an empty token,
		// which presents nothing, never "/messages-upsert" as the token.
		{"", "token=/messages-upsert", "", "", "messages-upsert", true},
	}
	for _, tt := range tests {
		got := parseTarget(tt.rest, tt.query)
		if got.pathToken != tt.path || got.queryToken != tt.tok || got.event != tt.event || got.hasQuery != tt.hasQuery {
			t.Errorf("parseTarget(%q, %q) = %+v", tt.rest, tt.query, got)
		}
	}
}

func TestTokenSetMatch(t *testing.T) {
	s := newTokenSet([]string{"a", "", "bb"})
	for tok, want := range map[string]bool{"a": true, "bb": true, "": false, "b": false, "abb": false} {
		if s.match(tok) != want {
			t.Errorf("match(%q) = %v, want %v", tok, !want, want)
		}
	}
	var h http.Header = map[string][]string{}
	if p := credential(h, requestTarget{}); p.method != "" {
		t.Errorf("credential of an empty request = %+v", p)
	}
}

func TestRedactPath(t *testing.T) {
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	for in, want := range map[string]string{
		"/webhooks/whatsapp/t/abc/messages-upsert": "/webhooks/whatsapp/t/[redacted]/messages-upsert",
		"/webhooks/whatsapp/t/abc":                 "/webhooks/whatsapp/t/[redacted]",
		"/webhooks/whatsapp/messages-upsert":       "/webhooks/whatsapp/messages-upsert",
		"/webhooks/whatsapp/t/":                    "/webhooks/whatsapp/t/",
		"/portal/t/abc":                            "/portal/t/abc",
		// A token in the wrong place is refused, and redacted all the same.
		"/webhooks/whatsapp/x/t/abc/messages-upsert": "/webhooks/whatsapp/x/t/[redacted]/messages-upsert",
		"/webhooks/whatsapp/T/abc":                   "/webhooks/whatsapp/T/[redacted]",
		"/webhooks/whatsapp/t/a/t/b":                 "/webhooks/whatsapp/t/[redacted]/t/[redacted]",
		"/webhooks/whatsapp/t//abc":                  "/webhooks/whatsapp/t//[redacted]",
	} {
		if got := i.RedactPath(in); got != want {
			t.Errorf("RedactPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// An empty credential header (a provider's header template with an unset
// variable, "Bearer " plus spaces) presents no credential: it counted as a
// method whose value differs from the URL token, so a delivery carrying a
// valid token was refused with 401, which Evolution never retries.
func TestEmptyCredentialHeaderDoesNotVetoAValidToken(t *testing.T) {
	const base = "/webhooks/whatsapp"
	tests := []struct {
		name    string
		target  string
		headers map[string]string
		code    int
	}{
		{"empty X-Webhook-Token + path token", base + "/t/test-token/messages-upsert", map[string]string{"X-Webhook-Token": ""}, 200},
		{"blank bearer + query token", base + "?token=test-token/messages-upsert", map[string]string{"Authorization": "Bearer   "}, 200},
		{"blank apikey + bearer", base, map[string]string{"apikey": " ", "Authorization": "Bearer test-token"}, 200},
		{"empty header alone", base, map[string]string{"X-Webhook-Token": ""}, 401},
		{"blank bearer alone", base, map[string]string{"Authorization": "Bearer   "}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
			r := httptest.NewRequest(http.MethodPost, tt.target, strings.NewReader(`{"a":1}`))
			r.Header.Set("Content-Type", "application/json")
			for k, v := range tt.headers {
				r.Header[http.CanonicalHeaderKey(k)] = []string{v}
			}
			w := httptest.NewRecorder()
			i.ServeHTTP(w, r)
			if w.Code != tt.code {
				t.Fatalf("code = %d %s, want %d", w.Code, w.Body.String(), tt.code)
			}
		})
	}
}
