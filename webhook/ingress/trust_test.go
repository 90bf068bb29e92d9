package ingress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/webhook/envelope"
)

// The attacks of the fresh pass on the webhook ingress (issue 22, docs/security.md
// "Webhook ingress"): each test is named after what the attack tries.

// do sends body to h with the header lines of lines (each name may repeat).
func doLines(h http.Handler, target, body string, lines [][2]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	for _, l := range lines {
		r.Header.Add(l[0], l[1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func signedLines(headers map[string]string) [][2]string {
	var out [][2]string
	for k, v := range headers {
		out = append(out, [2]string{k, v})
	}
	return out
}

// B03: a captured signed delivery replayed with any unsigned variant (its
// Content-Type in every accepted spelling, form-encoded included, the
// delivery-id headers, User-Agent, X-Request-Id, the event path) is the
// same event: one message, for every scheme.
func TestSignedReplayWithAnotherContentTypeOrUnsignedHeaderIsOneEvent(t *testing.T) {
	t.Parallel()
	contentTypes := []string{
		"application/json", "Application/JSON", "application/json; charset=utf-8", "APPLICATION/JSON;CHARSET=UTF-8",
		"application/vnd.github+json", "application/cloudevents+json", "application/x-www-form-urlencoded",
		"Application/X-WWW-Form-Urlencoded; charset=utf-8",
	}
	unsigned := []map[string]string{
		{}, {"Idempotency-Key": "replay-1"}, {"X-GitHub-Delivery": "replay-2"}, {"User-Agent": "replayer/1"},
		{"X-Request-Id": "r-9"}, {"X-GitHub-Event": "push"}, {"Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}
	for _, d := range signedDeliveries {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			o := defaultOptions()
			o.Sources = []Source{{Name: d.scheme, Path: d.path, IDFields: defaultIDFields, RedactFields: []string{"number"},
				Signature: &Signature{Scheme: d.scheme, Secrets: []string{d.secret}, Tolerance: 5 * time.Minute}}}
			pub := &fakePublisher{}
			i, _ := newUnitIngress(t, o, pub)
			i.now = func() time.Time { return time.Unix(1767225600, 0) }
			first := true
			for _, ct := range contentTypes {
				for _, extra := range unsigned {
					for _, suffix := range []string{"", "/push", "/t/x/other?e=1"} {
						lines := signedLines(d.headers)
						lines = append(lines, [2]string{"Content-Type", ct})
						for k, v := range extra {
							lines = append(lines, [2]string{k, v})
						}
						w := doLines(i, d.path+suffix, d.body, lines)
						want := StatusAlreadyProcessed
						if first {
							want, first = StatusPublishedConfirmed, false
						}
						if a := decodeAnswer(t, w); w.Code != http.StatusOK || a.Status != want {
							t.Fatalf("Content-Type %q, %v, path %q: %d %s, want 200 %s", ct, extra, suffix, w.Code, w.Body.String(), want)
						}
					}
				}
			}
			if msgs := pub.messages(); len(msgs) != 1 || msgs[0].ID != d.wantID {
				t.Fatalf("published %d messages, first id %q; want one with id %q", len(msgs), firstID(msgs), d.wantID)
			}
		})
	}
}

// B03, the other half: the id and the redaction of a signed delivery
// first sent form-encoded are those of its JSON form, so the first
// capture sent either way is the same event, redacted alike.
func TestSignedDeliverySentAsFormIsReadAsItsJSONBody(t *testing.T) {
	t.Parallel()
	for _, d := range signedDeliveries {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			o := defaultOptions()
			o.Sources = []Source{{Name: d.scheme, Path: d.path, IDFields: defaultIDFields, RedactFields: []string{"type", "number"},
				Signature: &Signature{Scheme: d.scheme, Secrets: []string{d.secret}, Tolerance: 5 * time.Minute}}}
			pub := &fakePublisher{}
			i, _ := newUnitIngress(t, o, pub)
			i.now = func() time.Time { return time.Unix(1767225600, 0) }
			lines := append(signedLines(d.headers), [2]string{"Content-Type", "application/x-www-form-urlencoded"})
			expect(t, doLines(i, d.path, d.body, lines), http.StatusOK, StatusPublishedConfirmed)
			msgs := pub.messages()
			if len(msgs) != 1 || msgs[0].ID != d.wantID {
				t.Fatalf("id %q, want %q", firstID(msgs), d.wantID)
			}
			env, err := envelope.Decode(msgs[0].Body)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(env.Body), `"type"`) || strings.Contains(string(env.Body), `"number"`) {
				t.Fatalf("form-typed JSON body published unredacted: %s", env.Body)
			}
		})
	}
}

// B13: a holder of the source's token sends another tenant's delivery id
// first, with another body; the real event must still be published (not
// answered ALREADY_PROCESSED and lost), and its retry deduplicated. Every
// way a token source's client names an id: each delivery-id header and
// the id_fields, with plain and hostile ids.
func TestTokenHolderCannotPreemptAnotherTenantsDeliveryID(t *testing.T) {
	t.Parallel()
	ids := []string{"evt-1", "k", strings.Repeat("x", 200), strings.Repeat("y", 190), "a:b", "sp ace", "\x1b[2J"}
	type claim struct {
		name string
		send func(id, text string) (map[string]string, string)
	}
	body := func(id, text string) string {
		b, _ := json.Marshal(map[string]any{"instance": "i", "event": "messages.upsert", "data": map[string]any{"key": map[string]any{"id": id}, "text": text}})
		return string(b)
	}
	header := func(name string) func(id, text string) (map[string]string, string) {
		return func(id, text string) (map[string]string, string) {
			h := bearer("test-token")
			h[name] = id
			return h, `{"text":"` + text + `"}`
		}
	}
	claims := []claim{
		{"Idempotency-Key", header("Idempotency-Key")},
		{"X-GitHub-Delivery", header("X-GitHub-Delivery")},
		{"Webhook-Id", header("Webhook-Id")},
		{"id_fields", func(id, text string) (map[string]string, string) { return bearer("test-token"), body(id, text) }},
	}
	for _, c := range claims {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pub := &fakePublisher{}
			i, _ := newUnitIngress(t, unitConfig(), pub)
			for _, id := range ids {
				if c.name != "id_fields" && strings.ContainsAny(id, "\x1b") {
					continue // not a header value httptest sends
				}
				ah, ab := c.send(id, "attacker's")
				expect(t, req{target: "/webhooks/whatsapp", body: ab, headers: ah}.do(i), http.StatusOK, StatusPublishedConfirmed)
				vh, vb := c.send(id, "the real event")
				expect(t, req{target: "/webhooks/whatsapp", body: vb, headers: vh}.do(i), http.StatusOK, StatusPublishedConfirmed)
				expect(t, req{target: "/webhooks/whatsapp", body: vb, headers: vh}.do(i), http.StatusOK, StatusAlreadyProcessed)
			}
			msgs := pub.messages()
			seen := map[string]bool{}
			for _, m := range msgs {
				if seen[m.ID] {
					t.Fatalf("two events published under one id %q", m.ID)
				}
				seen[m.ID] = true
				if !safeID(m.ID) {
					t.Errorf("id %q is not safe", m.ID)
				}
			}
			if want := 2 * countSendable(ids, c.name); len(msgs) != want {
				t.Fatalf("published %d events, want %d (each attacker's and each real one, no retry)", len(msgs), want)
			}
		})
	}
}

func countSendable(ids []string, claim string) int {
	n := 0
	for _, id := range ids {
		if claim == "id_fields" || !strings.ContainsAny(id, "\x1b") {
			n++
		}
	}
	return n
}

// B04: a field a signature scheme reads, sent on two lines with different
// values, is refused (401, reason signature_repeated) whichever line holds
// the valid value; an identical repeat reads one way and passes.
func TestRepeatedSignatureHeaderLinesAreRefused(t *testing.T) {
	t.Parallel()
	for _, d := range signedDeliveries {
		t.Run(d.scheme, func(t *testing.T) {
			t.Parallel()
			o := defaultOptions()
			o.Sources = []Source{{Name: d.scheme, Path: d.path,
				Signature: &Signature{Scheme: d.scheme, Secrets: []string{d.secret}, Tolerance: 5 * time.Minute}}}
			pub := &fakePublisher{}
			i, reg := newUnitIngress(t, o, pub)
			i.now = func() time.Time { return time.Unix(1767225600, 0) }
			v, _ := newVerifier(d.scheme, []string{d.secret}, time.Minute)
			refused := 0
			for _, field := range v.fields() {
				canon := http.CanonicalHeaderKey(field)
				for _, spelling := range []string{canon, strings.ToLower(field), strings.ToUpper(field)} {
					for _, validFirst := range []bool{true, false} {
						var lines [][2]string
						for k, val := range d.headers {
							if http.CanonicalHeaderKey(k) != canon {
								lines = append(lines, [2]string{k, val})
								continue
							}
							other := [2]string{spelling, val + "0"}
							if validFirst {
								lines = append(lines, [2]string{k, val}, other)
							} else {
								lines = append(lines, other, [2]string{k, val})
							}
						}
						lines = append(lines, [2]string{"Content-Type", "application/json"})
						w := doLines(i, d.path, d.body, lines)
						if w.Code != http.StatusUnauthorized {
							t.Fatalf("%s twice (%s, valid first %v): %d %s, want 401", field, spelling, validFirst, w.Code, w.Body.String())
						}
						refused++
					}
				}
			}
			if got := counterOf(t, reg, "borda_webhook_auth_failures_total", "signature_repeated"); int(got) != refused {
				t.Errorf("signature_repeated = %v, want %d", got, refused)
			}
			lines := signedLines(d.headers)
			for k, val := range d.headers {
				lines = append(lines, [2]string{k, val}) // every line twice, identical
			}
			lines = append(lines, [2]string{"Content-Type", "application/json"})
			expect(t, doLines(i, d.path, d.body, lines), http.StatusOK, StatusPublishedConfirmed)
		})
	}
}

// counterOf returns the value of the counter of family name with the
// single label value v, from reg (0 when absent).
func counterOf(t *testing.T, reg *prometheus.Registry, name, v string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == v {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

type invalidAnswer struct {
	Status, Reason, Message string
}

func expectInvalid(t *testing.T, w *httptest.ResponseRecorder, reason, what string) {
	t.Helper()
	var a invalidAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || w.Code != http.StatusBadRequest ||
		a.Status != StatusInvalidPayload || a.Reason != reason || a.Message == "" {
		t.Fatalf("%s: %d %s, want 400 INVALID_PAYLOAD %s with a message", what, w.Code, w.Body.String(), reason)
	}
}

// B20: two Content-Type lines, equal or not, in any case spelling, are
// refused 400 CONTENT_TYPE_REPEATED before the body is read.
func TestTwoContentTypeLinesAreRefused(t *testing.T) {
	t.Parallel()
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	pairs := [][2]string{
		{"application/json", "application/x-www-form-urlencoded"},
		{"application/x-www-form-urlencoded", "application/json"},
		{"application/json", "application/json"},
		{"application/json", "text/plain"},
		{"", "application/json"},
	}
	for _, p := range pairs {
		for _, names := range [][2]string{{"Content-Type", "Content-Type"}, {"content-type", "CONTENT-TYPE"}} {
			lines := [][2]string{{"Authorization", "Bearer test-token"}, {names[0], p[0]}, {names[1], p[1]}}
			expectInvalid(t, doLines(i, "/webhooks/whatsapp", `{"instance":"i","event":"e","data":{"key":{"id":"1"}}}`, lines),
				ReasonContentTypeRepeated, fmt.Sprintf("%v", p))
		}
	}
	if n := len(pub.messages()); n != 0 {
		t.Fatalf("%d messages published", n)
	}
}

// B18: a body read as JSON that is not UTF-8 is refused 400 INVALID_UTF8:
// every kind of invalid sequence, in a value and in a name, whatever the
// media type spelling that made it JSON.
func TestJSONBodyWithInvalidUTF8IsRefused(t *testing.T) {
	t.Parallel()
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	invalid := []string{"\xff", "\xfe", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80",
		"\xf8\x88\x80\x80\x80", "\xe2\x82", "\x80", "\xbf", "a\xc3", "\xf0\x9f\x98"}
	for _, bad := range invalid {
		for _, body := range []string{`{"text":"` + bad + `"}`, `{"` + bad + `":1}`, `{"data":{"msg":["ok","` + bad + `"]}}`} {
			for _, ct := range []string{"application/json", "Application/JSON; charset=utf-8", "application/x-www-form-urlencoded"} {
				expectInvalid(t, req{target: "/webhooks/whatsapp", contentType: ct, body: body, headers: bearer("test-token")}.do(i),
					ReasonInvalidUTF8, fmt.Sprintf("%q as %s", body, ct))
			}
		}
	}
	for _, ok := range []string{"olá", "日本", "😀", "\u00e9", `\ud83d\ude00`, `\u0000`} {
		expect(t, req{target: "/webhooks/whatsapp", body: `{"text":"` + ok + `"}`, headers: bearer("test-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
	}
}

// A036: an escaped lone surrogate ("\ud83d", what JSON.stringify writes
// for a string cut inside an emoji) was acknowledged, though Python,
// PostgreSQL jsonb and PHP cannot read the body, while the same code
// point as raw bytes was refused. Every unpaired surrogate escape, in a
// value or a name, any case of hex, is 400 INVALID_UTF8; pairs and
// escaped backslashes before a "u" are not surrogates.
func TestJSONBodyWithALoneSurrogateIsRefused(t *testing.T) {
	t.Parallel()
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	lone := []string{`\ud83d`, `\uD83D`, `\udc00`, `\uDFFF`, `\ud800\u0041`, `\udbff\ud800`, `\ude00\ud83d`, `a\ud83d`, `\ud83dx`,
		`\ud83d\`, `\\\ud83d`, `\ud83d\n`,
		`\ud800\ue000`, `\udbff\udbff`, `\ud800\udbff`} // a high one before the first and past the last low one
	for _, bad := range lone {
		for _, body := range []string{`{"text":"` + bad + `"}`, `{"` + bad + `":1}`, `{"data":["ok","` + bad + `"]}`} {
			if !json.Valid([]byte(body)) {
				continue // a spelling that is not JSON at all is refused as such
			}
			expectInvalid(t, req{target: "/webhooks/whatsapp", body: body, headers: bearer("test-token")}.do(i), ReasonInvalidUTF8, body)
		}
	}
	for _, ok := range []string{`\ud83d\ude00`, `\uD83D\uDE00`, `\\ud83d`, `\\\\ud83d`, `\u00e9`, `x\\u`, `\udbff\udfff`, `\ud800\udc00`, `\udbff\udc00`, `\ud800\udfff`} {
		expect(t, req{target: "/webhooks/whatsapp", body: `{"text":"` + ok + `"}`, headers: bearer("test-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
	}
}

// duplicateBodies name one member twice in one object, in every spelling
// encoding/json takes for one name; uniqueBodies do not (same names in
// different objects).
var (
	duplicateBodies = []string{
		`{"id":1,"id":2}`, `{"id":1,"id":1}`, `{"id":"a","\u0069d":"b"}`, `{"\u0069\u0064":1,"id":2}`, `{"id" : 1 , "id" : 2}`,
		`{"a":1,"b":2,"a":3}`, `{"data":{"key":{"id":"x","id":"y"}}}`, `{"list":[{"k":1},{"k":1,"k":2}]}`,
		`{"":1,"":2}`, `{"é":1,"\u00e9":2}`, `{"a\"b":1,"a\u0022b":2}`, `{"a\\b":1,"a\u005cb":2}`,
		`{"instance":"i","event":"e","data":{"key":{"id":"1"}},"event":"other"}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":0}`,
		`[{"a":{"b":[{"c":1,"c":2}]}}]`,
		// Equal under encoding/json's case folding (fresh attack pass A34).
		`{"ID":1,"id":2}`, `{"Id":1,"iD":2}`, `{"instance":"a","Instance":"b"}`, `{"event":"a","EVENT":"b"}`,
		`{"data":{"state":"open","State":"close"}}`, `{"state":"open","\u017ftate":"close"}`, `{"state":"open","ſtate":"close"}`,
		`{"key":1,"\u212aey":2}`, `{"key":1,"Key":2}`, `{"\u00c9":1,"é":2}`, `{"σ":1,"ς":2}`, `{"σ":1,"Σ":2}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"K3":0}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"\u212a3":0}`,
	}
	uniqueBodies = []string{
		`{"id":1}`, `{"a":{"a":1}}`, `[{"a":1},{"a":2}]`, `{"a":1,"b":{"a":2},"c":[{"a":3}]}`, `{"ID":1,"Data":{"id":2}}`, `{"i":1,"ı":2}`, `{"ss":1,"ß":2}`,
		`{"a":"id","id":"a"}`, `{"x":"\"id\":1,\"id\":2"}`, `{"a b":1,"ab":2}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":18}`,
		`{"a":{"x":1,"y":2},"b":{"x":1,"y":2}}`,
		`{"":1,"\"\"":2}`, `{"\"":1,"":2}`, // the empty name is not its quotes
	}
)

// B19: a body read as JSON that names a member twice in one object is
// refused 400 DUPLICATE_MEMBER, at any depth, in every escape spelling of
// the name; the same name in different objects is fine. Names are compared
// as encoding/json matches them to struct fields, case-insensitively under
// Unicode simple folding ("Instance", "ſtate"), since exact-name readers
// (PHP, Python, JavaScript) would read another member (fresh attack pass
// A34).
func TestJSONBodyWithDuplicateMemberIsRefused(t *testing.T) {
	t.Parallel()
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	for _, b := range duplicateBodies {
		expectInvalid(t, req{target: "/webhooks/whatsapp", body: b, headers: bearer("test-token")}.do(i), ReasonDuplicateMember, b)
	}
	for _, b := range uniqueBodies {
		expect(t, req{target: "/webhooks/whatsapp", body: b, headers: bearer("test-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
	}
}

// duplicateModel is the reference for jsonDuplicateMember: encoding/json's
// tokenizer, the decoded names per open object, compared with
// bytes.EqualFold (encoding/json's field matching).
func duplicateModel(b []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	type frame struct {
		object  bool
		names   []string
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.wantKey {
			for _, prev := range top.names {
				if strings.EqualFold(prev, s) {
					return true
				}
			}
			top.names = append(top.names, s)
			top.wantKey = false
			continue
		}
		if top != nil && top.object {
			top.wantKey = true // the value is read; a name comes next
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].wantKey = true
			}
		}
	}
}

func TestJSONDuplicateMemberMatchesTheModel(t *testing.T) {
	for _, b := range append(append([]string{}, duplicateBodies...), uniqueBodies...) {
		if got, want := jsonDuplicateMember([]byte(b)), duplicateModel([]byte(b)); got != want {
			t.Errorf("jsonDuplicateMember(%s) = %v, the encoding/json model says %v", b, got, want)
		}
	}
}

// FuzzJSONDuplicateMember holds jsonDuplicateMember to the encoding/json
// model on every valid UTF-8 JSON document (seed corpus in
// testdata/fuzz/FuzzJSONDuplicateMember).
func FuzzJSONDuplicateMember(f *testing.F) {
	for _, b := range append(append([]string{}, duplicateBodies...), uniqueBodies...) {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !jsonValid(b) || jsonRefused(b) == ReasonInvalidUTF8 {
			return
		}
		if got, want := jsonDuplicateMember(b), duplicateModel(b); got != want {
			t.Fatalf("jsonDuplicateMember(%q) = %v, the encoding/json model says %v", b, got, want)
		}
	})
}

// B32: one source's configuration mistake (an unset variable, an
// undecodable secret, no credential at all) makes that source answer 503
// NOT_CONFIGURED and no other.
func TestOneMisconfiguredSourceDoesNotTakeTheOthersDown(t *testing.T) {
	t.Parallel()
	broken := []Source{
		{Name: "unset", Path: "/webhooks/unset", NotConfigured: errors.New("webhook.sources[1].tokens_env: UNSET_TOKENS is empty or unset")},
		{Name: "badwhsec", Path: "/webhooks/badwhsec", Signature: &Signature{Scheme: "standard", Secrets: []string{"whsec_!!!not-base64"}}},
		{Name: "emptywhsec", Path: "/webhooks/emptywhsec", Signature: &Signature{Scheme: "standard", Secrets: []string{"whsec_"}}},
		{Name: "nosecret", Path: "/webhooks/nosecret", Signature: &Signature{Scheme: "github"}},
		{Name: "blank", Path: "/webhooks/blank", Signature: &Signature{Scheme: "stripe", Secrets: []string{"  "}}},
		{Name: "unknown", Path: "/webhooks/unknown", Signature: &Signature{Scheme: "rot13", Secrets: []string{"s"}}},
		{Name: "nothing", Path: "/webhooks/nothing"},
	}
	for _, b := range broken {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			o := unitConfig()
			o.Sources = append(o.Sources, b)
			pub := &fakePublisher{}
			i, reg := newUnitIngress(t, o, pub)
			w := req{target: b.Path, body: `{"a":1}`, headers: bearer("test-token")}.do(i)
			if a := decodeAnswer(t, w); w.Code != http.StatusServiceUnavailable || a.Reason != ReasonNotConfigured || w.Header().Get("Retry-After") == "" {
				t.Fatalf("broken source: %d %s, want 503 NOT_CONFIGURED with Retry-After", w.Code, w.Body.String())
			}
			expect(t, req{target: "/webhooks/whatsapp", body: `{"a":2}`, headers: bearer("test-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
			if n := len(pub.messages()); n != 1 {
				t.Fatalf("%d messages, want the good source's one", n)
			}
			if got := gaugeValue(t, reg, "borda_webhook_source_not_configured", b.Name); got != 1 {
				t.Errorf("borda_webhook_source_not_configured{source=%q} = %v, want 1", b.Name, got)
			}
		})
	}
	o := defaultOptions()
	o.Sources = broken
	if _, err := New(o, &fakePublisher{}, discardLogger(), prometheus.NewRegistry()); err == nil {
		t.Fatal("New with every source broken = nil error, want one (the Unconfigured stand-in then serves)")
	}
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name, source string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "source" && l.GetValue() == source {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	return -1
}

// A04: a body under any content coding the ingress does not decode (every
// spelling, list and line form) is refused 415 with Accept-Encoding:
// identity, never acknowledged; identity (or none) is served.
func TestCompressedWebhookBodyIsRefusedNotAcknowledged(t *testing.T) {
	t.Parallel()
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	refused := [][]string{{"gzip"}, {"GZIP"}, {"x-gzip"}, {"br"}, {"deflate"}, {"zstd"}, {"compress"}, {"identity, gzip"},
		{"gzip, identity"}, {"identity", "gzip"}, {" Gzip "}, {"aes128gcm"}, {",gzip"}, {"unknown-coding"}}
	for _, ce := range refused {
		lines := [][2]string{{"Authorization", "Bearer test-token"}, {"Content-Type", "application/x-www-form-urlencoded"}}
		for _, v := range ce {
			lines = append(lines, [2]string{"Content-Encoding", v})
		}
		w := doLines(i, "/webhooks/whatsapp", "\x1f\x8b\x08\x00a=1", lines)
		if a := decodeAnswer(t, w); w.Code != http.StatusUnsupportedMediaType || a.Reason != ReasonContentEncoding || w.Header().Get("Accept-Encoding") != "identity" {
			t.Errorf("Content-Encoding %q: %d %s, want 415 %s", ce, w.Code, w.Body.String(), ReasonContentEncoding)
		}
	}
	for n, ce := range [][]string{nil, {"identity"}, {"IDENTITY"}, {""}, {"identity, identity"}} {
		lines := [][2]string{{"Authorization", "Bearer test-token"}, {"Content-Type", "application/x-www-form-urlencoded"}}
		for _, v := range ce {
			lines = append(lines, [2]string{"Content-Encoding", v})
		}
		expect(t, doLines(i, "/webhooks/whatsapp", fmt.Sprintf("a=%d", n), lines), http.StatusOK, StatusPublishedConfirmed)
	}
	if n := len(pub.messages()); n != 5 {
		t.Fatalf("%d messages, want only the 5 identity ones", n)
	}
}

// A74: a configured token in any segment of any path (no "/t/" marker,
// another marker word, a prefix in front of the source, another route, a
// parameter or dots around it) never reaches the redacted path; paths
// without a token are kept as they are.
func TestConfiguredTokenInAnyPathSegmentIsRedacted(t *testing.T) {
	t.Parallel()
	o := unitConfig() // tokens test-token, next-token
	o.addSources(Source{Name: "zapster", Path: "/webhooks/zapster", Tokens: []string{"zap-tok-0123456789"}})
	i, _ := newUnitIngress(t, o, &fakePublisher{})
	shapes := []string{
		"/webhooks/whatsapp/%s", "/webhooks/whatsapp/token/%s", "/webhooks/whatsapp/tt/%s", "/x/webhooks/whatsapp/t/%s",
		"/gw/webhooks/whatsapp/%s/messages-upsert", "/%s", "/api/%s;x=1", "/a/.%s.", "/Webhooks/WhatsApp/%s", "/webhooks/zapster/%s",
		"/webhooks/whatsapp/t/a/%s", "/a//%s//b", "/%s/%s", "/a/%s;v=%s", "/webhooks/whatsapp;p/%s/e",
	}
	for _, tok := range []string{"test-token", "next-token", "zap-tok-0123456789"} {
		for _, shape := range shapes {
			p := strings.ReplaceAll(shape, "%s", tok)
			if got := i.RedactPath(p); strings.Contains(got, tok) {
				t.Errorf("RedactPath(%q) = %q: the token is still there", p, got)
			}
		}
	}
	for _, keep := range []string{"/", "/api/v1/users", "/webhooks/whatsapp/messages-upsert", "/test-tokens", "/x/test-toke"} {
		if got := i.RedactPath(keep); got != keep {
			t.Errorf("RedactPath(%q) = %q, want it unchanged", keep, got)
		}
	}
}

// A77: a token holder opening many connections with a large
// Content-Length made the ingress allocate each body up front (300 × 1 MiB:
// RSS 49 → 359 MB). Token-authenticated bodies are charged to a budget of
// their own, the Content-Length reserved at once: past it 503
// BODY_BUDGET_EXHAUSTED (Retry-After, connection closed), from the same
// client and from others; released when the holders go.
func TestTokenHolderCannotHoldMoreBodyMemoryThanTheBudget(t *testing.T) {
	t.Parallel()
	for _, holders := range []int{4, 6} {
		t.Run(fmt.Sprint(holders), func(t *testing.T) {
			const size = 64 << 10 // each holder announces this and sends 10 bytes
			cfg := flatOptions("test-token")
			cfg.MaxBodyBytes = 1 << 20
			cfg.UnauthenticatedBodyBytes = int64(holders*size + size/2)
			i, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			i.SetClientIP(func(r *http.Request) string { return r.Header.Get("X-Test-Client") })
			srv := httptest.NewServer(i)
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			head := func(client string) string {
				return fmt.Sprintf("POST /webhooks/whatsapp HTTP/1.1\r\nHost: x\r\nX-Test-Client: %s\r\nAuthorization: Bearer test-token\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", client, size)
			}
			var held []net.Conn
			for n := range holders {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				fmt.Fprint(c, head(fmt.Sprint("holder-", n))+`{"a":"aaa`)
				held = append(held, c)
			}
			deadline := time.Now().Add(5 * time.Second)
			for i.authBudget.used.Load() < int64(holders*size) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := i.authBudget.used.Load(); got != int64(holders*size) {
				t.Fatalf("budget used %d, want %d (each Content-Length reserved)", got, holders*size)
			}
			for _, client := range []string{"holder-0", "late"} {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				fmt.Fprint(c, head(client))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatalf("%s: no answer past the budget: %v", client, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 503 || !resp.Close || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), ReasonBodyBudget) {
					t.Fatalf("%s past the budget: %d close=%v %s", client, resp.StatusCode, resp.Close, body)
				}
			}
			for _, h := range held {
				h.Close()
			}
			deadline = time.Now().Add(5 * time.Second)
			for i.authBudget.used.Load() != 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := i.authBudget.used.Load(); got != 0 {
				t.Fatalf("the budget was not released: %d bytes", got)
			}
		})
	}
}

// A060: a configured token deeper than the 64th segment was printed
// verbatim (the comparison stops there, silently). The segments past the
// bound are never compared, so they become one redacted segment; a token
// within the bound is redacted as before, and a path within the bound is
// kept whole.
func TestConfiguredTokenPastTheSegmentBoundNeverReachesTheLog(t *testing.T) {
	t.Parallel()
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	deep := func(at, total int, tok string) string {
		segs := make([]string, total)
		for j := range segs {
			segs[j] = "a"
		}
		if at > 0 {
			segs[at-1] = tok
		}
		return "/" + strings.Join(segs, "/")
	}
	for _, at := range []int{12, 63, 64, 65, 66, 200} {
		for _, total := range []int{at, at + 1, at + 40} {
			p := deep(at, total, "test-token")
			got := i.RedactPath(p)
			if strings.Contains(got, "test-token") {
				t.Errorf("token as segment %d of %d: still there", at, total)
			}
			if strings.Count(got, "/") > maxRedactSegments+1 {
				t.Errorf("token as segment %d of %d: %d segments printed", at, total, strings.Count(got, "/"))
			}
		}
	}
	if p := deep(0, maxRedactSegments-1, ""); i.RedactPath(p) != p {
		t.Errorf("a path within the bound without a token changed")
	}
	if got := i.RedactPath(deep(0, 100, "")); !strings.HasSuffix(got, "/"+redactedSegment) || strings.Count(got, "/") != maxRedactSegments {
		t.Errorf("a path past the bound: %q", got)
	}
}

// TestFoldNameAgreesWithEqualFold: foldName(x) == foldName(y) exactly
// when bytes.EqualFold(x, y), at the edges of the ASCII letters, for runes
// with no case, and for bytes that are not UTF-8.
func TestFoldNameAgreesWithEqualFold(t *testing.T) {
	names := []string{"a", "A", "z", "Z", "`", "@", "{", "[", "s", "S", "ſ", "k", "K", "\u212a", "σ", "ς", "Σ",
		"中", "中文", "é", "É", "1", "_", "\x80", "\xff", "\xc3", "ı", "i", "I", "ß", "ss"}
	for _, x := range names {
		for _, y := range names {
			same := string(foldName([]byte(x))) == string(foldName([]byte(y)))
			if want := bytes.EqualFold([]byte(x), []byte(y)); same != want {
				t.Errorf("foldName(%q) == foldName(%q) is %v, bytes.EqualFold says %v", x, y, same, want)
			}
		}
	}
}
