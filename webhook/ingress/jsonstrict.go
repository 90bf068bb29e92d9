package ingress

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Reasons of a 400 INVALID_PAYLOAD refusal of a body read as JSON that
// parsers would read differently (docs/webhooks.md §3).
const (
	// ReasonInvalidUTF8: the body is not UTF-8 (RFC 8259 §8.1 requires
	// it). encoding/json turns each invalid byte into U+FFFD, Python's
	// json refuses the body: one event, two readings.
	ReasonInvalidUTF8 = "INVALID_UTF8"
	// ReasonDuplicateMember: an object names a member twice (names
	// compared after decoding escapes, as encoding/json compares them).
	// encoding/json, JavaScript's JSON.parse, Python's json and
	// PostgreSQL's jsonb keep the last; gjson, jq's `first` paths and many
	// streaming parsers the first: the id Borda derives and the id a
	// consumer reads could differ (RFC 8259 §4: names SHOULD be unique).
	ReasonDuplicateMember = "DUPLICATE_MEMBER"
	// ReasonContentTypeRepeated: two Content-Type field lines (RFC 9110
	// §5.3: it is a singleton field); which one a parser believes is
	// undefined, so the body's kind would be too.
	ReasonContentTypeRepeated = "CONTENT_TYPE_REPEATED"
	// ReasonContentEncoding (415): a content coding other than identity;
	// the ingress decodes none, and the envelope would carry the coded
	// bytes under a media type that does not say so.
	ReasonContentEncoding = "CONTENT_ENCODING_UNSUPPORTED"
)

// identityCoding reports whether the Content-Encoding lines vs name no
// coding but identity (a list field: every line, every comma-separated
// member, any letter case; empty members are ignored, RFC 9110 §5.6.1).
func identityCoding(vs []string) bool {
	for _, v := range vs {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// invalidMessages are the PT-BR messages of the refusals above, for
// whoever reads a provider's delivery log.
var invalidMessages = map[string]string{
	ReasonInvalidUTF8:         "O corpo JSON não é UTF-8 válido.",
	ReasonDuplicateMember:     "O corpo JSON repete um membro num mesmo objeto.",
	ReasonContentTypeRepeated: "O cabeçalho Content-Type aparece mais de uma vez.",
}

// respondInvalid writes 400 {"status":"INVALID_PAYLOAD","reason":reason,
// "message":"<PT-BR>"}: the ingress's contract (status and reason, as
// every answer), plus a message.
func respondInvalid(w http.ResponseWriter, reason string) string {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	w.WriteHeader(http.StatusBadRequest)
	msg, _ := json.Marshal(invalidMessages[reason])
	_, _ = io.WriteString(w, `{"status":"`+StatusInvalidPayload+`","reason":"`+reason+`","message":`+string(msg)+"}\n")
	return StatusInvalidPayload
}

// jsonRefused returns why body, valid JSON (jsonValid), is refused, or "":
// ReasonInvalidUTF8 or ReasonDuplicateMember. Every object at every depth
// is checked: the members Borda reads (id_fields, redact_fields,
// Stripe's id) are not the only ones its consumers read.
func jsonRefused(body []byte) string {
	if !utf8.Valid(body) {
		return ReasonInvalidUTF8
	}
	if jsonDuplicateMember(body) {
		return ReasonDuplicateMember
	}
	return ""
}

// smallObject is how many member names an object's check compares
// pairwise before it switches to a map.
const smallObject = 16

// jsonDuplicateMember reports whether an object of b (valid JSON) names a
// member twice. Names are compared after decoding (`"\u0069d"` is `"id"`),
// as encoding/json compares them. It reads b once; plain ASCII names are
// compared in place, without allocating.
func jsonDuplicateMember(b []byte) bool {
	type frame struct {
		object bool
		first  int                 // this object's names: names[first:]
		big    map[string]struct{} // once it holds more than smallObject
	}
	var stackBuf [16]frame
	stack := stackBuf[:0]
	var namesBuf [32][]byte
	names := namesBuf[:0]
	for i := 0; i < len(b); {
		switch b[i] {
		case '"':
			end := skipString(b, i)
			if n := len(stack); n > 0 && stack[n-1].object {
				if j := skipSpace(b, end); j < len(b) && b[j] == ':' { // a member name
					top := &stack[n-1]
					name := memberName(b[i:end])
					if top.big != nil {
						if _, dup := top.big[string(name)]; dup {
							return true
						}
						top.big[string(name)] = struct{}{}
					} else {
						for _, prev := range names[top.first:] {
							if bytes.Equal(prev, name) {
								return true
							}
						}
						names = append(names, name)
						if len(names)-top.first > smallObject {
							top.big = make(map[string]struct{}, 2*smallObject)
							for _, prev := range names[top.first:] {
								top.big[string(prev)] = struct{}{}
							}
							names = names[:top.first]
						}
					}
				}
			}
			i = end
			continue
		case '{', '[':
			stack = append(stack, frame{object: b[i] == '{', first: len(names)})
		case '}', ']':
			if n := len(stack); n > 0 {
				names = names[:stack[n-1].first]
				stack = stack[:n-1]
			}
		}
		i++
	}
	return false
}

// memberName is a quoted member name decoded as encoding/json decodes it;
// a plain ASCII name is returned in place.
func memberName(quoted []byte) []byte {
	if len(quoted) < 2 {
		return quoted
	}
	inner := quoted[1 : len(quoted)-1]
	if isPlain(inner) {
		return inner
	}
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return inner
	}
	return []byte(s)
}
