package ingress

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// A form body that form parsers read differently is refused 400
// AMBIGUOUS_FORM before anything is published (fresh attack pass 7 W03:
// "payload=<victim close>&payload=<legit open>" was 200; Go's
// url.Values.Get, which borda consume-events used, read the first, PHP's
// $_POST, Rack and Django the last). Every spelling under which some
// modelled parser reads a second "payload", or reads the payload field
// though Go does not, is refused; distinct fields, and repeats of one
// exact "name[]" list, are not.
func TestFormBodyReadDifferentlyIsRefused(t *testing.T) {
	t.Parallel()
	event := url.QueryEscape(`{"event":"connection.update","instance":"i","data":{"state":"open"}}`)
	refused := []string{
		"payload=" + event + "&payload=" + event,       // exact repeat
		"payload=" + event + "&Payload=" + event,       // ASP.NET: names without case
		"payload=" + event + "&payload%5Bx%5D=1",       // PHP: an array under payload
		"payload=" + event + "&%5Bpayload%5D=1",        // Rack 2: leading brackets dropped
		"payload=" + event + "&payload%00x=1",          // PHP: the name ends at NUL
		"payload=" + event + "&+payload=1",             // PHP: leading spaces dropped
		"payload%5B%5D=" + event + "&payload=" + event, // a list and a scalar
		"a.b=1&a_b=2",                 // PHP reads both as a_b
		"a%20b=1&a_b=2",               // PHP: ' ' reads as '_'
		"a=1&A=2",                     // any field, not only payload
		"x=1&x=2",                     // any field repeated
		"%20payload=" + event,         // the payload under a spelling Go does not read
		"PAYLOAD=" + event,            // the payload under another case
		"payload=" + event + ";x=1",   // ';': Go's ParseQuery refuses the body
		"payload=" + event + "&%zz=1", // a broken escape Go refuses
	}
	accepted := []string{
		"payload=" + event,
		"payload=" + event + "&token=x&source=evolution",
		"ids%5B%5D=1&ids%5B%5D=2&payload=" + event, // one list, repeated as a list
		"a.b=1&c=2",
		"payload=" + event + "&&",
	}
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	for _, b := range refused {
		expectInvalid(t, req{target: "/webhooks/whatsapp", contentType: "application/x-www-form-urlencoded", body: b, headers: bearer("test-token")}.do(i), ReasonAmbiguousForm, b)
	}
	for _, b := range accepted {
		expect(t, req{target: "/webhooks/whatsapp", contentType: "application/x-www-form-urlencoded", body: b, headers: bearer("test-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
	}
}

// Fresh attack pass 7 W16: "application/json; charset=latin1" on a UTF-8
// body was 200 and the label forwarded; readers that honour the charset
// read other text than Go and jsonb. A charset other than UTF-8 is 400
// INVALID_UTF8; none, or UTF-8 in any spelling, is accepted.
func TestBodyLabelledWithAnotherCharsetIsRefused(t *testing.T) {
	t.Parallel()
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	body := `{"id":"charset-é"}`
	for _, ct := range []string{"application/json; charset=latin1", "application/json; charset=ISO-8859-1", "application/json;charset=utf-16", `application/json; charset="windows-1252"`, "application/x-www-form-urlencoded; charset=latin1"} {
		expectInvalid(t, req{target: "/webhooks/whatsapp", contentType: ct, body: body, headers: bearer("test-token")}.do(i), ReasonInvalidUTF8, ct)
	}
	for n, ct := range []string{"application/json", "application/json; charset=utf-8", "application/json; charset=UTF-8", `application/json; charset="utf8"`} {
		b := fmt.Sprintf(`{"id":"charset-ok-%d"}`, n)
		expect(t, req{target: "/webhooks/whatsapp", contentType: ct, body: b, headers: bearer("test-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
	}
}

// Fresh attack pass 8 W01: the JSON inside a form body's payload field
// skipped the checks a JSON body gets: a repeated or case-folded member,
// a lone surrogate and an out-of-range number were 200, and consume-events
// wrote "victim | close" where PHP read another event. Each is refused
// with the JSON body's reason.
func TestFormPayloadJSONIsHeldToTheJSONChecks(t *testing.T) {
	t.Parallel()
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	for reason, payloads := range map[string][]string{
		ReasonDuplicateMember:  {`{"event":"connection.update","instance":"legit","instance":"victim"}`, `{"instance":"legit","Instance":"victim"}`},
		ReasonInvalidUTF8:      {`{"instance":"surr\ud83dx"}`},
		ReasonNumberOutOfRange: {`{"instance":"a","z":1e999999}`},
	} {
		for _, p := range payloads {
			expectInvalid(t, req{target: "/webhooks/whatsapp", contentType: "application/x-www-form-urlencoded", body: "payload=" + url.QueryEscape(p), headers: bearer("test-token")}.do(i), reason, p)
		}
	}
	for n, p := range []string{`{"event":"connection.update","instance":"ok"}`, `not json`} {
		b := fmt.Sprintf("payload=%s&n=%d", url.QueryEscape(p), n)
		expect(t, req{target: "/webhooks/whatsapp", contentType: "application/x-www-form-urlencoded", body: b, headers: bearer("test-token")}.do(i), http.StatusOK, StatusPublishedConfirmed)
	}
}
