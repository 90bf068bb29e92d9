package gateway

import (
	"net/http"
	"net/url"
	"strings"
)

// queryTokenParam is the query parameter RFC 6750 §2.3 carries a Bearer
// token in; upstreams such as passport-http-bearer and Doorkeeper accept it.
const queryTokenParam = "access_token"

// identifyQueryToken makes the limiter count the user a query token
// (?access_token=…) authenticates at the upstream, which the gateway
// forwards untouched: without a header or cookie credential the query
// token is the request's identity; with one, a query token that differs
// from it (or two differing query tokens) is refused 400 like any two
// credentials for one slot. Every key a modelled upstream parser reads as
// access_token is a candidate (isQueryTokenKey). It reports whether the
// request goes on. Form bodies (access_token in an urlencoded body) are
// not read here (docs/edge.md, "One credential per request").
func (s *Server) identifyQueryToken(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	raw := r.URL.RawQuery
	if !mayHoldQueryToken(raw) {
		return true
	}
	var token string
	for _, v := range queryTokenValues(raw) {
		switch {
		case v == "" || v == token:
		case token != "":
			writeProblem(w, problemConflictingCredentials, ex.id)
			return false
		default:
			token = v
		}
	}
	switch {
	case token == "":
		return true
	case ex.credential.Token != "" && ex.credential.Token != token:
		writeProblem(w, problemConflictingCredentials, ex.id)
		return false
	case ex.credential.Token == "" && s.verifier != nil:
		if id, ok := s.verifier.Verify(token); ok {
			ex.identity = id
			ex.queryToken = token
		}
	}
	return true
}

// mayHoldQueryToken is the allocation-free precheck: a query can hold a
// candidate key only if it holds an escape or "token" in some case.
func mayHoldQueryToken(raw string) bool {
	if strings.IndexByte(raw, '%') >= 0 {
		return true
	}
	for i := 0; i+5 <= len(raw); i++ {
		if c := raw[i+2]; (c == 'k' || c == 'K') && strings.EqualFold(raw[i:i+5], "token") {
			return true
		}
	}
	return false
}

// isQueryTokenKey reports whether key (decoded) is access_token to one of
// the upstream parsers Borda models: Go/Express/Rack (exact), PHP (leading
// spaces dropped; ' ', '.' and an unmatched '[' read as '_'; "name[...]"
// is an array under name, whose first element PHP, Rack and qs hand to
// code that reads it), ASP.NET (case-insensitive). Over-matching only
// makes more keys candidates, which are then the identity or refused.
func isQueryTokenKey(key string) bool {
	key = strings.TrimLeft(key, " ")
	if i := strings.IndexByte(key, '['); i >= 0 && strings.IndexByte(key[i:], ']') > 0 {
		key = key[:i]
	}
	if len(key) != len(queryTokenParam) {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == ' ' || c == '.' || c == '[':
			c = '_'
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		}
		if c != queryTokenParam[i] {
			return false
		}
	}
	return true
}

// queryTokenValues returns the values of every candidate query-token pair
// of raw (isQueryTokenKey), each decoded as url.ParseQuery decodes them
// (malformed pairs skipped), without building the whole map.
func queryTokenValues(raw string) []string {
	var out []string
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if v, ok := queryTokenPair(pair); ok {
			out = append(out, v)
		}
	}
	return out
}

// queryTokenPair decodes one "key=value" pair and reports whether its key
// is a query-token candidate.
func queryTokenPair(pair string) (string, bool) {
	key, val, _ := strings.Cut(pair, "=")
	if strings.ContainsAny(key, "%+") {
		k, err := url.QueryUnescape(key)
		if err != nil {
			return "", false
		}
		key = k
	}
	if !isQueryTokenKey(key) {
		return "", false
	}
	v, err := url.QueryUnescape(val)
	if err != nil {
		return "", false
	}
	return v, true
}

// withoutQueryToken returns raw without the candidate pairs whose value is
// token (the portal's verified credential), the other pairs byte for byte.
func withoutQueryToken(raw, token string) string {
	if !mayHoldQueryToken(raw) {
		return raw
	}
	kept := make([]string, 0, 4)
	changed := false
	for rest := raw; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		if v, ok := queryTokenPair(pair); ok && v == token {
			changed = true
			continue
		}
		kept = append(kept, pair)
	}
	if !changed {
		return raw
	}
	return strings.Join(kept, "&")
}
