package ingress

import (
	"net/url"
	"strings"

	"github.com/olp-edu/borda/internal/formkey"
)

// formPayloadField is the form field whose value Borda's own consumer
// (instances.Parse) reads as the event's JSON.
const formPayloadField = "payload"

// formRefused returns ReasonAmbiguousForm when body, an
// application/x-www-form-urlencoded body, is one that the form parsers
// its consumers use would read differently, or "":
//
//   - Go's url.ParseQuery refuses it (a ';' separator, a broken '%'
//     escape): Go readers (borda consume-events) then read no field,
//     while PHP and Django read them all;
//   - two fields read as one name to some parser (formkey.Readings): Go's
//     url.Values.Get takes the first, PHP's $_POST, Rack and Django's
//     request.POST the last (fresh attack pass 7 W03: consume-events
//     wrote the first "payload", the legacy PHP endpoint read the second).
//     Repeats of one exact "name[]" (a list every parser reads as one)
//     are not refused;
//   - a field that some parser reads as "payload" is not spelled exactly
//     "payload" (" payload", "payload[x]", "Payload", "payload\x00x"):
//     the PHP endpoint would read the event that Go readers skip.
//
// A payload field that is JSON is then held to jsonRefused, whose reason
// is returned. It is the form side of jsonRefused: one delivery, one
// reading.
func formRefused(body []byte) string {
	raw := string(body)
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return ReasonAmbiguousForm
	}
	seen := make(map[string]string) // a reading → the exact name read under it
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		k, _, _ := strings.Cut(pair, "=")
		exact, err := url.QueryUnescape(k)
		if err != nil {
			return ReasonAmbiguousForm
		}
		for _, name := range formkey.Readings(formkey.Unescape(k)) {
			if name == formPayloadField && exact != formPayloadField {
				return ReasonAmbiguousForm
			}
			if prev, ok := seen[name]; ok && !(prev == exact && strings.HasSuffix(exact, "[]")) {
				return ReasonAmbiguousForm
			}
			seen[name] = exact
		}
	}
	// The payload's JSON is read by consumers as a JSON body is: held to
	// the same checks (fresh attack pass 8 W01: a repeated or case-folded
	// member, a lone surrogate or 1e999999 inside the payload field was
	// 200, and consume-events and PHP read two different events).
	if p := []byte(vals.Get(formPayloadField)); len(p) > 0 && jsonValid(p) {
		return jsonRefused(p)
	}
	return ""
}
