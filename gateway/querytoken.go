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
// credentials for one slot. It reports whether the request goes on.
// Form bodies (access_token in an urlencoded body) are not read here
// (docs/edge.md, "One credential per request").
func (s *Server) identifyQueryToken(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	raw := r.URL.RawQuery
	// ParseQuery decodes keys, so access%5Ftoken and %61ccess_token are
	// the same parameter to the upstream: a query is parsed when it holds
	// the name or any escape.
	if !mayHoldQueryToken(raw) {
		return true
	}
	var token string
	for _, v := range queryValues(raw, queryTokenParam) {
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
		}
	}
	return true
}

// queryValues returns the values of the query parameter name in raw, each
// pair's key and value decoded as url.ParseQuery decodes them (malformed
// pairs skipped), without building the whole map: only a pair whose key
// holds an escape is decoded to be compared, so the common query costs
// no allocation.
func queryValues(raw, name string) []string {
	var out []string
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		key, val, _ := strings.Cut(pair, "=")
		if !queryKeyIs(key, name) {
			continue
		}
		v, err := url.QueryUnescape(val)
		if err != nil {
			continue
		}
		out = append(out, v)
	}
	return out
}

// mayHoldQueryToken reports whether the raw query may hold a parameter
// an upstream reads as access_token: it names "token" or holds an escape.
func mayHoldQueryToken(raw string) bool {
	return strings.Contains(raw, "token") || strings.IndexByte(raw, '%') >= 0
}

// queryKeyIs reports whether the raw query key is the parameter name to
// a common upstream: decoded as url.ParseQuery decodes it, then as PHP
// (and so Laravel and Symfony) names it: leading spaces dropped, '.' and
// ' ' read as '_', an array "name[]" or "name[0]" read as name (PHP and
// Rack hand the first element to code that asks for one value), an
// unmatched '[' read as '_' (attack pass A49: ?access.token=,
// ?access+token=, ?access[token=, ?access_token[]= skipped the limiter
// while a PHP upstream read the user's token from them).
func queryKeyIs(key, name string) bool {
	if strings.ContainsAny(key, "%+") {
		k, err := url.QueryUnescape(key)
		if err != nil {
			return false
		}
		key = k
	}
	if key == name {
		return true
	}
	return phpQueryKey(key) == name
}

// phpQueryKey is the variable name PHP's query parser gives key.
func phpQueryKey(key string) string {
	key = strings.TrimLeft(key, " ")
	tail := ""
	if i := strings.IndexByte(key, '['); i >= 0 {
		if strings.IndexByte(key[i:], ']') > 0 {
			key = key[:i] // an array: its base name
		} else {
			key, tail = key[:i], "_"+key[i+1:] // PHP keeps what follows as is
		}
	}
	return strings.NewReplacer(".", "_", " ", "_").Replace(key) + tail
}

// stripQueryToken returns raw without the parameters an upstream reads
// as name (queryKeyIs), for a route that must not receive the portal's
// token.
func stripQueryToken(raw, name string) string {
	if !mayHoldQueryToken(raw) {
		return raw
	}
	var b strings.Builder
	for rest := raw; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		key, _, _ := strings.Cut(pair, "=")
		if queryKeyIs(key, name) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(pair)
	}
	return b.String()
}
