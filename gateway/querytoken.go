package gateway

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/olp-edu/borda/internal/formkey"
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
// read by identifyFormToken, after this.
func (s *Server) identifyQueryToken(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	raw := r.URL.RawQuery
	if !mayHoldQueryToken(raw) {
		return true
	}
	token, ok := oneTokenValue(raw)
	if !ok {
		s.refuseCredential(w, r, ex, problemConflictingCredentials)
		return false
	}
	ex.queryCandidate = token
	switch {
	case token == "":
		return true
	case ex.credential.Token != "" && ex.credential.Token != token:
		s.refuseCredential(w, r, ex, problemConflictingCredentials)
		return false
	case ex.credential.Token == "" && s.verifier != nil:
		if id, ok := s.verifier.Verify(token); ok {
			ex.identity = id
			ex.queryToken = token
		}
	}
	return true
}

// oneTokenValue returns the one non-empty value of raw's candidate pairs
// (queryTokenValues: a query or an urlencoded form), "" when there is
// none; ok is false when two differ (two credentials for one slot).
func oneTokenValue(raw string) (token string, ok bool) {
	for _, v := range queryTokenValues(raw) {
		switch {
		case v == "" || v == token:
		case token != "":
			return "", false
		default:
			token = v
		}
	}
	return token, true
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
// the upstream parsers Borda models:
//
//   - Go, Express: the exact name;
//   - PHP (parse_str, $_GET, $_POST): the name ends at a NUL byte, leading
//     spaces are dropped, ' ', '.' and an unmatched '[' read as '_', and
//     "name[...]" is an array under name, whose first element code reading
//     it gets;
//   - Rack 2 (parse_nested_query: Rails ≤ 7.0, Doorkeeper): leading '[' and
//     ']' are dropped and the name ends at the first '[' or ']'
//     ("[access_token]", "access_token]", "access_token[x");
//   - ASP.NET: names without case.
//
// Over-matching only makes more keys candidates, which are then the
// identity or refused. The readings were checked against php-cli 8.2 and
// Rack 2.2 over every single-byte insertion and replacement in the name
// (TestQueryTokenKeysEveryModelledParserReadsAsAccessToken holds them).
func isQueryTokenKey(key string) bool {
	if i := strings.IndexByte(key, 0); i >= 0 {
		key = key[:i]
	}
	key = strings.TrimLeft(key, " ")
	rack := strings.TrimLeft(key, "[]")
	if i := strings.IndexAny(rack, "[]"); i >= 0 {
		rack = rack[:i]
	}
	if sameQueryTokenName(rack) {
		return true
	}
	if i := strings.IndexByte(key, '['); i >= 0 && strings.IndexByte(key[i:], ']') > 0 {
		key = key[:i]
	}
	return sameQueryTokenName(key)
}

// sameQueryTokenName reports whether name is access_token read without
// case, with ' ', '.' and '[' as '_' (PHP's mangling).
func sameQueryTokenName(name string) bool {
	if len(name) != len(queryTokenParam) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
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
// of raw (isQueryTokenKey), without building the whole map. Pairs are
// separated by '&' and by ';' (Rack 2 splits on both; Go refuses a pair
// holding ';', so reading it only adds candidates); each value is decoded
// as url.ParseQuery decodes it (a pair whose value does not decode is
// skipped: no parser reads a JWS from it), each key as leniently as PHP
// decodes it (formkey.Unescape).
func queryTokenValues(raw string) []string {
	var out []string
	for raw != "" {
		var pair string
		pair, raw = nextQueryPair(raw)
		if v, ok := queryTokenPair(pair); ok {
			out = append(out, v)
		}
	}
	return out
}

// nextQueryPair splits raw at its first '&' or ';' (the separator is
// dropped).
func nextQueryPair(raw string) (pair, rest string) {
	i := strings.IndexAny(raw, "&;")
	if i < 0 {
		return raw, ""
	}
	return raw[:i], raw[i+1:]
}

// queryTokenPair decodes one "key=value" pair and reports whether its key
// is a query-token candidate.
func queryTokenPair(pair string) (string, bool) {
	key, val, _ := strings.Cut(pair, "=")
	if strings.ContainsAny(key, "%+") {
		key = formkey.Unescape(key)
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
