package ingress

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// Credential methods, in the order they are looked for (docs/webhooks.md §2).
const (
	credBearer = "bearer"
	credHeader = "x-webhook-token"
	credAPIKey = "apikey-header"
	credURL    = "url"
)

// tokenSet holds the SHA-256 digests of the accepted tokens (several
// during a rotation). Only digests are kept, so comparisons take the same
// time whatever the token lengths.
type tokenSet [][sha256.Size]byte

func newTokenSet(tokens []string) tokenSet {
	s := make(tokenSet, 0, len(tokens))
	for _, t := range tokens {
		if t != "" {
			s = append(s, sha256.Sum256([]byte(t)))
		}
	}
	return s
}

// match reports whether token is one of the set, comparing digests with
// crypto/subtle against every entry (no early exit).
func (s tokenSet) match(token string) bool {
	d := sha256.Sum256([]byte(token))
	ok := 0
	for i := range s {
		ok |= subtle.ConstantTimeCompare(d[:], s[i][:])
	}
	return ok == 1
}

// presented is the credential a request carries: the value of the
// highest-priority method, or conflict when methods disagree or one form
// is given twice.
type presented struct {
	value    string
	method   string // "" when no credential was sent
	conflict bool
	repeated bool // one form given twice (conflict is set too)
}

// requestTarget is what the URL says beyond the source's path: a token
// (path form {path}/t/{token}[/{event}] or ?token=) and an event name
// (last sub-path segment, or what Evolution appended to the query).
type requestTarget struct {
	pathToken  string
	queryToken string
	hasQuery   bool
	event      string
	// repeated: the path form (/t/a/t/b) or the query key token
	// (?token=a&token=b, percent-encoded keys included) appears twice,
	// whatever the values: an ambiguous credential, refused (401).
	repeated bool
}

// parseTarget reads rest (the request path after the source's path, "" or
// starting with "/") and the raw query. Evolution's "webhook by events"
// appends "/{event}" to the raw URL string, so "?token=abc" arrives as
// "?token=abc/messages-upsert": a query value ends at its first "/" and
// what follows the last "/" of the query is the event.
func parseTarget(rest, rawQuery string) requestTarget {
	var t requestTarget
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	if len(segs) == 1 && segs[0] == "" {
		segs = nil
	}
	// Never an event the redaction hides ("/x/t/{token}" sent with a
	// header credential, "/t/{token}/{token}"): it would carry the token
	// into the envelope.
	hidden := len(segs) > 0 && isMarked(tokenSegments(segs), len(segs)-1)
	if len(segs) >= 2 && segs[0] == "t" {
		t.pathToken = segs[1]
		segs = segs[2:]
		if len(segs) >= 2 && segs[0] == "t" {
			t.repeated = true
		}
	}
	if len(segs) > 0 && !hidden {
		t.event = segs[len(segs)-1]
	}
	if rawQuery == "" {
		return t
	}
	if i := strings.LastIndexByte(rawQuery, '/'); i >= 0 && t.event == "" {
		t.event = rawQuery[i+1:]
	}
	// Not url.ParseQuery: it decodes "+" as a space, so a token with a
	// "+" (base64 alphabets have one) would never match and every
	// delivery would get a 401, which Evolution never retries.
	for _, kv := range strings.Split(rawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if strings.IndexByte(k, '%') >= 0 { // "%74oken" is token to any decoder
			if u, err := url.PathUnescape(k); err == nil {
				k = u
			}
		}
		if k != "token" {
			continue
		}
		if t.hasQuery {
			t.repeated = true
			break
		}
		if i := strings.IndexByte(v, '/'); i >= 0 {
			v = v[:i]
		}
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		t.queryToken, t.hasQuery = v, true
	}
	return t
}

// credential collects every credential the request presents, in priority
// order: Authorization: Bearer, X-Webhook-Token, apikey header, URL token
// (path form, then query). Any two that differ is a conflict. So is any
// form given twice, whatever the values (two Authorization, X-Webhook-Token
// or apikey field lines, in any letter case; ?token= twice; /t/a/t/b):
// RFC 9110 §5.3 allows a repeated field only for list-based fields, and
// an ambiguous credential is refused rather than guessed (docs/webhooks.md
// §2). An Authorization header with another scheme is not a credential
// here, nor is a single empty value (a blank header presents nothing).
func credential(h http.Header, t requestTarget) presented {
	var p presented
	// The server canonicalizes field names, so "authorization" and
	// "AUTHORIZATION" lines land in the same slice.
	if len(h["Authorization"]) > 1 || len(h["X-Webhook-Token"]) > 1 || len(h["Apikey"]) > 1 || t.repeated {
		p.conflict, p.repeated = true, true
		return p
	}
	add := func(method, v string) {
		if v == "" {
			return
		}
		if p.method == "" {
			p.method, p.value = method, v
			return
		}
		if subtle.ConstantTimeCompare([]byte(p.value), []byte(v)) != 1 {
			p.conflict = true
		}
	}
	if a := h.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		add(credBearer, strings.TrimSpace(a[7:]))
	}
	add(credHeader, strings.TrimSpace(h.Get("X-Webhook-Token")))
	add(credAPIKey, strings.TrimSpace(h.Get("Apikey")))
	if t.pathToken != "" {
		add(credURL, t.pathToken)
	}
	if t.hasQuery {
		add(credURL, t.queryToken)
	}
	return p
}
