package ingress

import (
	"net/http"
	"strings"
	"testing"

	"github.com/olp-edu/borda/webhook/envelope"
)

// TestEventIDOrder: the digests are pinned to sha256sum of the bodies
// (printf '%s' '<body>' | sha256sum; the 300 x's: printf 'x%.0s' $(seq 300)
// | sha256sum), not computed by the code under test.
func TestEventIDOrder(t *testing.T) {
	evolution := splitFields([]string{"instance", "event", "data.key.id"})
	body := []byte(`{"instance":"i1","event":"messages.upsert","data":{"key":{"id":"K1"}}}`)
	tests := []struct {
		name    string
		headers map[string]string
		body    []byte
		json    bool
		fields  [][]string
		want    string
	}{
		{"webhook-id first", map[string]string{"Webhook-Id": "w1", "X-GitHub-Delivery": "g1"}, body, true, evolution, "w1"},
		{"X-GitHub-Delivery", map[string]string{"X-GitHub-Delivery": "g1", "Idempotency-Key": "k"}, body, true, evolution, "g1"},
		{"Idempotency-Key", map[string]string{"Idempotency-Key": "k"}, body, true, evolution, "k"},
		{"Evolution fields", nil, body, true, evolution, "i1:messages.upsert:K1"},
		{"Zapster top-level id", nil, []byte(`{"id":"z1","type":"message.received"}`), true, splitFields([]string{"id"}), "z1"},
		{"numeric id", nil, []byte(`{"id":42}`), true, splitFields([]string{"id"}), "42"},
		{"missing field → body digest", nil, []byte(`{"instance":"i1","event":"qrcode.updated","data":{}}`), true, evolution, "6e1cf1a5381e47aeed07c3e7d7e9402f3cb3adb34aa84354a6053a3481c68b7f"},
		{"object leaf → body digest", nil, []byte(`{"id":{"a":1}}`), true, splitFields([]string{"id"}), "d05480223b37fbae30f23edd7f5b729ced1ba7f82ca785ea3fbc951c6b11de3e"},
		{"form body → digest", nil, []byte("payload=%7B%7D"), false, evolution, "c9a9ff8126e94878114d12a11cc665fe257672fcff145d4b658f9c443ad3e945"},
		{"array body → digest", nil, []byte(`[1]`), true, evolution, "080a9ed428559ef602668b4c00f114f1a11c3f6b02a435f0bdc154578e4d7f22"},
		// No fields configured: the JSON body's digest (printf '%s' '{"a":1}' | sha256sum), never an empty join.
		{"no fields → body digest", nil, []byte(`{"a":1}`), true, nil, "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"},
		{"long header id → derived", map[string]string{"Webhook-Id": strings.Repeat("x", 300)}, body, true, nil, "sha256:0d4e2ca9e9cbced7a7a5380eb29e1a3783b9b6d0db72de36a1051038e1c1fbc7"},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.headers {
			h.Set(k, v)
		}
		if got := eventID(h, tt.body, tt.json, tt.fields); got != tt.want {
			t.Errorf("%s: eventID = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestRedactFieldsKeepsOtherBytes(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"event":"x","apikey":"SECRET","data":{"apikey":"inner"}}`, `{"event":"x","data":{"apikey":"inner"}}`},
		{`{"apikey":"SECRET", "event": "x"}`, `{ "event": "x"}`},
		{`{"apikey":"SECRET"}`, `{}`},
		{`{ "a": 1.0,  "apikey" : null , "t": "Gold 🥇" }`, `{ "a": 1.0 , "t": "Gold 🥇" }`},
		{`{"apikey":1,"apikey":2,"b":3}`, `{"b":3}`},
		{`{"b":"\u00e9"}`, `{"b":"\u00e9"}`},
		{`[1,2]`, `[1,2]`},
	}
	for _, tt := range tests {
		got, removed, err := redactFields([]byte(tt.in), []string{"apikey"})
		if err != nil || string(got) != tt.want {
			t.Errorf("redactFields(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
		if strings.Contains(tt.in, `"apikey"`) && strings.HasPrefix(tt.in, "{") && len(removed) != 1 {
			t.Errorf("redactFields(%s) removed %v", tt.in, removed)
		}
	}
}

func FuzzRedactFields(f *testing.F) {
	f.Add([]byte(`{"event":"x","apikey":"SECRET"}`))
	f.Add([]byte(`{ "apikey" : [1, {"a":2}] , "b":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !jsonValid(body) {
			return // the ingress redacts only valid JSON
		}
		out, removed, err := redactFields(body, []string{"apikey"})
		if err != nil || len(removed) == 0 {
			return
		}
		if !jsonValid(out) {
			t.Fatalf("redactFields(%q) = %q, not JSON", body, out)
		}
		again, removed2, err := redactFields(out, []string{"apikey"})
		if err != nil || len(removed2) != 0 || string(again) != string(out) {
			t.Fatalf("second pass changed %q → %q (%v, %v)", out, again, removed2, err)
		}
	})
}

func FuzzParseTarget(f *testing.F) {
	f.Add("/t/abc/messages-upsert", "token=abc/messages-upsert")
	f.Add("", "token=%zz")
	f.Fuzz(func(t *testing.T, rest, query string) {
		tg := parseTarget(rest, query)
		if strings.Contains(tg.queryToken, "/") || strings.Contains(tg.pathToken, "/") {
			t.Fatalf("token with a slash: %+v", tg)
		}
	})
}

// An id with a byte that cannot travel in an Idempotency-Key header or be
// printed on a terminal (CR, LF, NUL, ESC, other C0 and C1 controls, DEL,
// invalid UTF-8, non-ASCII, edge spaces, over-long) is replaced by
// "sha256:" + hex of its exact bytes, from a header or from the body.
func TestHostileEventIDIsDerived(t *testing.T) {
	ids := []struct{ name, json, raw string }{
		{"CR LF", `"a\r\nX-Injected: 1"`, "a\r\nX-Injected: 1"},
		{"LF", `"a\nb"`, "a\nb"},
		{"NUL", `"a\u0000b"`, "a\x00b"},
		{"ESC (terminal escape)", `"\u001b[2J\u001b]0;pwned\u0007"`, "\x1b[2J\x1b]0;pwned\x07"},
		{"TAB", `"a\tb"`, "a\tb"},
		{"DEL", `"a\u007fb"`, "a\x7fb"},
		{"C1 CSI", `"a\u009b31m"`, "a\u009b31m"},
		{"non-ASCII", `"são-paulo:1"`, "são-paulo:1"},
		{"bidi override", `"a\u202eb"`, "a\u202eb"},
		{"invalid UTF-8", "\"a\xffb\"", "a\xffb"},
		{"lone surrogate", `"a\ud800b"`, "a\xed\xa0\x80b"},
		{"leading space", `" a"`, " a"},
		{"over-long", `"` + strings.Repeat("k", 201) + `"`, strings.Repeat("k", 201)},
	}
	for _, tt := range ids {
		want := "sha256:" + digestHex([]byte(tt.raw))
		body := []byte(`{"id":` + tt.json + `}`)
		if got := eventID(http.Header{}, body, true, splitFields([]string{"id"})); got != want {
			t.Errorf("%s in the body: id %q, want %q", tt.name, got, want)
		}
		if strings.ContainsAny(tt.raw, "\r\n\x00") {
			continue // net/http refuses these in a header
		}
		h := http.Header{"Webhook-Id": {tt.raw}}
		if got := eventID(h, nil, true, nil); tt.name != "leading space" && got != want {
			t.Errorf("%s in Webhook-Id: id %q, want %q", tt.name, got, want)
		}
	}
}

// Printable ASCII ids stay as they are, quotes, commas and inner spaces
// included (all valid in a header value).
func TestPrintableEventIDIsKept(t *testing.T) {
	for _, id := range []string{"AC0FFEE0", "i1:messages.upsert:K1", `a"b,c;d\e`, "Minha Instancia:1", strings.Repeat("k", 200), "~!@#$%^&*()"} {
		if got := bounded(id); got != id {
			t.Errorf("bounded(%q) = %q, want it unchanged", id, got)
		}
	}
}

// encoding/json turns every invalid byte and lone surrogate into U+FFFD,
// so two different hostile ids became one and the second event was
// answered ALREADY_PROCESSED without being published. The exact decoding
// keeps them apart, and the same hostile bytes still give the same id.
func TestDistinctHostileIDsStayDistinct(t *testing.T) {
	fields := splitFields([]string{"id"})
	id := func(s string) string { return eventID(http.Header{}, []byte(`{"id":`+s+`}`), true, fields) }
	pairs := [][2]string{
		{"\"a\xffb\"", "\"a\xfeb\""},
		{`"a\ud800"`, `"a\ud801"`},
		{"\"\xc0\xaf\"", "\"\xe0\x80\xaf\""}, // two over-long encodings of '/'
		{`"\ud83d\ude00"`, `"\ud83d\ude01"`},
	}
	for _, p := range pairs {
		if a, b := id(p[0]), id(p[1]); a == b {
			t.Errorf("ids %s and %s both became %q", p[0], p[1], a)
		}
		if a, b := id(p[0]), id(p[0]); a != b {
			t.Errorf("%s: %q then %q, want one stable id", p[0], a, b)
		}
	}
	// Equal texts written differently are one id, as before.
	if a, b := id(`"\u00e9"`), id(`"é"`); a != b {
		t.Errorf(`"\u00e9" → %q, "é" → %q, want one id`, a, b)
	}
	if a := id(`"\u0041\/"`); a != "A/" {
		t.Errorf(`escaped plain id = %q, want "A/"`, a)
	}
}

// An event name from the URL with an escaped control character or a line
// break never reaches the envelope; a plain one does.
func TestHostileEventNameFromTheURLIsDropped(t *testing.T) {
	for target, want := range map[string]string{
		"/webhooks/whatsapp/t/test-token/messages-upsert":             "messages-upsert",
		"/webhooks/whatsapp/t/test-token/%1b%5b2J":                    "",
		"/webhooks/whatsapp/t/test-token/a%0d%0aX-Injected:%201":      "",
		"/webhooks/whatsapp/t/test-token/caf%c3%a9":                   "",
		"/webhooks/whatsapp?token=test-token/%1b]0;pwned%07":          "%1b]0;pwned%07", // the query is not decoded: inert text
		"/webhooks/whatsapp/t/test-token/" + strings.Repeat("e", 201): "",
	} {
		pub := &fakePublisher{}
		i, _ := newUnitIngress(t, unitConfig(), pub)
		expect(t, req{target: target, body: `{"a":1}`}.do(i), 200, StatusPublishedConfirmed)
		env, err := envelope.Decode(pub.messages()[0].Body)
		if err != nil {
			t.Fatal(err)
		}
		if env.Event != want {
			t.Errorf("%s: event %q, want %q", target, env.Event, want)
		}
	}
}

func TestDeliveryIDHeadersAreCanonical(t *testing.T) {
	for _, name := range deliveryIDHeaders {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("deliveryIDHeaders holds %q, want its canonical form %q (Get canonicalises, and allocates, otherwise)", name, c)
		}
	}
}

// TestJSONStringDecodesEscapesLosingNothing: a pair of surrogate escapes is
// one code point (UTF-8), an unpaired one its 3-byte WTF-8 form, and the
// edges of both ranges are exact. Expected bytes from Python:
// s.encode("utf-8", "surrogatepass").
func TestJSONStringDecodesEscapesLosingNothing(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		ok        bool
	}{
		{`""`, "", true},
		{`"\ud800\udc00"`, "\xf0\x90\x80\x80", true},   // the lowest pair
		{`"\udbff\udfff"`, "\xf4\x8f\xbf\xbf", true},   // the highest pair
		{`"a\ud83d\ude00"`, "a\xf0\x9f\x98\x80", true}, // a pair that ends the string
		{`"\ud83d\ude00"`, "\xf0\x9f\x98\x80", true},
		{`"\udc00\udc00"`, "\xed\xb0\x80\xed\xb0\x80", true}, // two lows are no pair
		{`"\ud800\ud800"`, "\xed\xa0\x80\xed\xa0\x80", true}, // nor two highs
		{`"\udfff"`, "\xed\xbf\xbf", true},
		{`"\ud7ff"`, "\xed\x9f\xbf", true}, // below the surrogates
		{`"\ue000"`, "\xee\x80\x80", true}, // above them
		{`"\ud83d\ude0"`, "", false},       // a truncated second escape
		{`"\\"`, `\`, true},                // an escaped backslash
		{`"a\\\\b"`, `a\\b`, true},
		{"\"\x80\"", "\x80", true}, // invalid UTF-8 kept as it is
	} {
		got, ok := jsonString([]byte(c.raw))
		if got != c.want || ok != c.ok {
			t.Errorf("jsonString(%s) = %q, %v; want %q, %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}
