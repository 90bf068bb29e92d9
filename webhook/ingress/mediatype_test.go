package ingress

import (
	"net/http"
	"strings"
	"testing"

	"github.com/olp-edu/borda/webhook/envelope"
)

// mediaSpellings are Content-Type values as clients spell them and the
// kind each is (RFC 9110 §8.3.1: type and subtype are case-insensitive,
// parameters follow ";" with optional whitespace).
var mediaSpellings = []struct {
	v    string
	kind int
}{
	{"application/json", mediaJSON},
	{"Application/JSON", mediaJSON},
	{"APPLICATION/JSON", mediaJSON},
	{"application/json; charset=UTF-8", mediaJSON},
	{"application/json;charset=utf-8", mediaJSON},
	{"application/json ; charset=utf-8", mediaJSON},
	{" application/json", mediaJSON},
	{"application/vnd.foo+json", mediaJSON},
	{"Application/Vnd.Foo+JSON; v=2", mediaJSON},
	{"application/x-www-form-urlencoded", mediaForm},
	{"Application/X-WWW-Form-Urlencoded; charset=UTF-8", mediaForm},
	{"text/plain", mediaOther},
	{"text/json", mediaOther},
	{"application/jsonx", mediaOther},
	{"application/json/x", mediaOther},
	{"", mediaOther},
	{"application/json; charset", mediaOther}, // a parameter without a value does not parse
}

func TestMediaKindSpellings(t *testing.T) {
	t.Parallel()
	for _, s := range mediaSpellings {
		if got := mediaKind(s.v); got != s.kind {
			t.Errorf("mediaKind(%q) = %d, want %d", s.v, got, s.kind)
		}
	}
}

// TestRedactFieldsEveryJSONSpelling: a body the ingress parses as JSON is
// redacted as JSON whatever the Content-Type's spelling ("Application/JSON"
// was parsed but skipped redact_fields).
func TestRedactFieldsEveryJSONSpelling(t *testing.T) {
	t.Parallel()
	for _, s := range mediaSpellings {
		if s.kind != mediaJSON {
			continue
		}
		o := unitConfig()
		o.Sources[0].RedactFields = []string{"apikey"}
		pub := &fakePublisher{}
		i, _ := newUnitIngress(t, o, pub)
		w := req{target: "/webhooks/whatsapp", contentType: s.v, body: `{"event":"x","apikey":"SECRET-KEY"}`, headers: bearer("test-token")}.do(i)
		expect(t, w, http.StatusOK, StatusPublishedConfirmed)
		msgs := pub.messages()
		if len(msgs) != 1 {
			t.Fatalf("%q: %d messages", s.v, len(msgs))
		}
		env, err := envelope.Decode(msgs[0].Body)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(env.Body), "SECRET-KEY") || len(env.Redacted) != 1 {
			t.Errorf("Content-Type %q: body %s, redacted %v; want apikey removed", s.v, env.Body, env.Redacted)
		}
	}
}

// TestBodyIsJSONReadsNothingPastTheBody: a body of other media that is
// empty or only whitespace is not JSON, and deciding so reads nothing past
// its last byte.
func TestBodyIsJSONReadsNothingPastTheBody(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{{"", false}, {"   ", false}, {"\r\n", false}, {" {}", true}, {"{", false}, {"[]", false}} {
		b := []byte(c.body)
		if got := bodyIsJSON(mediaForm, b[:len(b):len(b)]); got != c.want {
			t.Errorf("bodyIsJSON(form, %q) = %v, want %v", c.body, got, c.want)
		}
	}
}
