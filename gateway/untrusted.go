package gateway

import (
	"bytes"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// A route that does not forward the portal's session (cookies.
// ForwardsSession false: a third-party upstream behind `forward: []`)
// still answers on the portal's origin. Its responses must not act as the
// portal (docs/edge.md, "Untrusted routes"): they carry
// Content-Security-Policy: sandbox by default (the document gets an opaque
// origin, runs no script, and its requests to the portal's API are
// cross-site), and lose Clear-Site-Data and Service-Worker-Allowed; the
// olp_* Set-Cookie policy (cookies.ApplySetCookie) removes every portal
// cookie in any spelling. A route that does forward the session accepts
// a WebSocket upgrade only from its own origin or its CORS
// allowed_origins (upgradeOriginAllowed).

// dropPortalCredential removes from the outbound request of a route that
// does not forward the session every credential the client sent that the
// gateway verified as the portal's: the Bearer header, the query-token
// pairs (every spelling isQueryTokenKey reads) holding that token, and
// the form-body pairs holding it (a body identifyFormToken read; the
// body is rewritten and its length set). A portal SPA that adds its
// Bearer to every same-origin request, a WebSocket client with
// ?access_token=, or a form that posts the token would otherwise hand
// the user's session to the third party (fresh attack passes A93, 7
// X01). A credential that does not verify (the third party's own API
// key) passes untouched; so does every credential when no verifier is
// configured (the gateway then cannot tell the portal's tokens from
// others: docs/edge.md).
func (s *Server) dropPortalCredential(out *http.Request, ex *exchange) {
	s.dropVerifiedValues(out, ex)
	if ex.identity.Anonymous() {
		return
	}
	token := ex.credential.Token
	if token == "" {
		token = ex.queryToken
	}
	if token == "" {
		token = ex.formToken
	}
	if token == "" {
		return
	}
	if ex.credential.Bearer == token || ex.credential.Scheme == token {
		delete(out.Header, "Authorization")
	}
	if q := withoutTokenValue(out.URL.RawQuery, token); q != out.URL.RawQuery {
		out.URL.RawQuery = q
		out.URL.ForceQuery = false
	}
	if ex.formBody != nil {
		if b := withoutTokenValue(string(ex.formBody), token); len(b) != len(ex.formBody) {
			out.Body = &replayedBody{Reader: bytes.NewReader([]byte(b)), body: &ex.body}
			out.ContentLength = int64(len(b))
			out.TransferEncoding = nil
			out.GetBody = nil
		}
	}
}

// maxVerifiedValues bounds the JWS-shaped query and form values a request
// to a route that forwards no session has verified (dropVerifiedValues):
// each costs one signature check.
const maxVerifiedValues = 4

// dropVerifiedValues removes from the outbound query and form body every
// pair whose value holds a JWS that verifies as the portal's token,
// whatever its key ("?token=", "?jwt=", "?auth=Bearer <t>": fresh attack
// pass 8 Q01), even when the request carries no other credential. At most
// maxVerifiedValues words are verified; past that budget every other
// JWS-shaped pair is removed unverified (fresh attack pass 9 U04: decoys
// in a link a third party wrote spent the budget before the token a
// portal page appended to it), so the budget bounds the work, never what
// is kept.
func (s *Server) dropVerifiedValues(out *http.Request, ex *exchange) {
	if s.verifier == nil {
		return
	}
	checked := 0
	drop := func(raw string) string {
		for _, w := range jwsWords(raw) {
			if checked >= maxVerifiedValues {
				raw = withoutTokenValue(raw, w)
				continue
			}
			checked++
			if _, ok := s.verifier.Verify(w); ok {
				raw = withoutTokenValue(raw, w)
			}
		}
		return raw
	}
	if q := drop(out.URL.RawQuery); q != out.URL.RawQuery {
		out.URL.RawQuery = q
		out.URL.ForceQuery = false
	}
	// A Referer naming a portal page opened with ?access_token= carries
	// the token too (fresh attack pass 8 Q02): cut it to its origin, as
	// Referrer-Policy: strict-origin would have, whenever its path or
	// query holds anything JWS-shaped, verified or not. Its URL is the
	// page's, not the request's, so the request's own values cannot
	// spend a verification budget it depends on (fresh attack pass 9
	// U04: four decoys in the query let the Referer through whole), and
	// cutting a Referer costs the third party nothing it may have.
	for _, ref := range out.Header.Values("Referer") {
		if u, err := url.Parse(ref); err != nil || len(jwsWords(u.EscapedPath())) > 0 || len(jwsWords(u.RawQuery)) > 0 {
			origin := ""
			if err == nil && u.Scheme != "" && u.Host != "" {
				origin = u.Scheme + "://" + u.Host + "/"
			}
			if origin == "" {
				out.Header.Del("Referer")
			} else {
				out.Header.Set("Referer", origin)
			}
			break
		}
	}
	if ex.formBody != nil {
		if b := drop(string(ex.formBody)); len(b) != len(ex.formBody) {
			ex.formBody = []byte(b)
			out.Body = &replayedBody{Reader: bytes.NewReader(ex.formBody), body: &ex.body}
			out.ContentLength = int64(len(b))
			out.TransferEncoding = nil
			out.GetBody = nil
		}
	}
}

// jwsWords returns the distinct JWS-shaped words (three dot-separated
// base64url parts) of the decoded keys and values of raw, a query or a
// form (or a path: its "/" separate words). Decoded as every query parser
// decodes them: a "." written "%2E" is a dot (fresh attack pass 9
// U01-U03), and a pair without "=" is a key a raw-query reader takes
// whole (U07: "?<token>").
func jwsWords(raw string) []string {
	if strings.Count(raw, ".")+countFold(raw, "%2e") < 2 {
		return nil
	}
	var out []string
	for rest := raw; rest != ""; {
		var pair string
		pair, rest = nextQueryPair(rest)
		for _, part := range strings.SplitN(pair, "=", 2) {
			if dv, err := url.QueryUnescape(part); err == nil {
				part = dv
			}
			for _, w := range strings.FieldsFunc(part, func(r rune) bool {
				return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.')
			}) {
				if strings.Count(w, ".") == 2 && !strings.HasPrefix(w, ".") && !strings.HasSuffix(w, ".") && !strings.Contains(w, "..") && !slices.Contains(out, w) {
					out = append(out, w)
				}
			}
		}
	}
	return out
}

// countFold counts the occurrences of sub (ASCII lower case) in s, in any
// case.
func countFold(s, sub string) int {
	n := 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			n++
		}
	}
	return n
}

// withoutTokenValue returns raw (a query or an urlencoded form) without
// every pair whose key or value, decoded, holds token, whatever its key (fresh
// attack pass 8 Q01: "?token=", "?jwt=", "?auth=Bearer%20<t>" and
// "?access_token=Bearer%20<t>" reached the third party; only the
// access_token spellings were removed). The other pairs and their
// separators stay byte for byte.
func withoutTokenValue(raw, token string) string {
	if raw == "" || token == "" {
		return raw
	}
	var b strings.Builder
	changed := false
	for rest := raw; rest != ""; {
		pair, next := nextQueryPair(rest)
		sep := ""
		if len(pair) < len(rest) {
			sep = rest[len(pair) : len(pair)+1]
		}
		rest = next
		// The key too: "?<token>" (no "=") is the whole raw query to a
		// reader of QUERY_STRING (fresh attack pass 9 U07).
		if dv, err := url.QueryUnescape(pair); (err == nil && strings.Contains(dv, token)) || strings.Contains(pair, token) {
			changed = true
			continue
		}
		b.WriteString(pair)
		b.WriteString(sep)
	}
	if !changed {
		return raw
	}
	return strings.TrimRight(b.String(), "&;")
}

// sandboxOff, sandboxOn and sandboxAuto are the values of Route.Sandbox
// that are not token lists.
const (
	sandboxAuto = ""
	sandboxOff  = "off"
	sandboxOn   = "on"
)

// sandboxHeader is the Content-Security-Policy value a route's responses
// get for the route's Sandbox setting: "" (auto) is "sandbox" on a route
// that does not forward the session and nothing on one that does, "off"
// nothing, "on" "sandbox", and a list of sandbox tokens ("allow-scripts
// allow-popups") "sandbox " followed by them.
func sandboxHeader(setting string, session bool) string {
	switch strings.TrimSpace(setting) {
	case sandboxAuto:
		if session {
			return ""
		}
		return "sandbox"
	case sandboxOff:
		return ""
	case sandboxOn:
		return "sandbox"
	}
	return "sandbox " + strings.Join(strings.Fields(setting), " ")
}

// confineSetCookie confines every Set-Cookie in h to path (the route's
// prefix) and to the host: its Path and Domain attributes are replaced
// by Path=path, so a cookie a third-party route sets is sent back to that
// route only. Without it, one visit to a third-party page could plant 40
// × 4 KB year-long cookies on the portal's origin (every portal request
// then too large to serve: a lock-out) or fix a non-portal cookie such as
// csrftoken (attack pass A81). A route at "/" confines nothing (it is the
// whole origin); an unusable path ("") removes every Set-Cookie.
func confineSetCookie(h http.Header, path string) {
	lines := h["Set-Cookie"]
	if len(lines) == 0 || path == "/" {
		return
	}
	if path == "" {
		delete(h, "Set-Cookie")
		return
	}
	out := make([]string, 0, len(lines))
	for _, line := range lines {
		var b strings.Builder
		for i, part := range strings.Split(line, ";") {
			if i > 0 {
				name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
				if strings.EqualFold(strings.TrimSpace(name), "path") || strings.EqualFold(strings.TrimSpace(name), "domain") {
					continue
				}
				b.WriteByte(';')
			}
			b.WriteString(part)
		}
		b.WriteString("; Path=")
		b.WriteString(path)
		out = append(out, b.String())
	}
	h["Set-Cookie"] = out
}

// cookiePathFor is the Set-Cookie Path of a route with prefix: prefix
// escaped as a URL path, or "" when the result could not stand as a
// cookie attribute value (';', ',', controls, spaces).
func cookiePathFor(prefix string) string {
	if prefix == "" {
		return "/"
	}
	p := (&url.URL{Path: prefix}).EscapedPath()
	if strings.ContainsAny(p, ";, \t\"") {
		return ""
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x21 || p[i] > 0x7e {
			return ""
		}
	}
	return p
}

// untrustedResponseHeaders are removed from the responses of a route that
// does not forward the session: Clear-Site-Data would clear the portal's
// cookies and storage (logging the user out), Service-Worker-Allowed would
// let a worker script of the route control paths outside it, and a
// WWW-Authenticate challenge (Basic, Digest, Negotiate) would make the
// browser ask for a password in a dialog titled with the portal's origin
// and then send it to every path of that origin (fresh attack pass A85;
// the 401 itself passes). So are the headers whose policy a browser keeps
// for the whole origin, not the one response (fresh attack pass 11, A24):
// NEL and Report-To (the browser would report every portal request's URL,
// query tokens included, to the route's collector), Alt-Svc (where the
// browser connects for the whole origin), Strict-Transport-Security, the
// FedCM login status (Set-Login), Origin-Agent-Cluster and the client
// hints the browser then sends to every path (Accept-CH, Critical-CH).
var untrustedResponseHeaders = []string{"Clear-Site-Data", "Service-Worker-Allowed", "Www-Authenticate",
	"Nel", "Report-To", "Alt-Svc", "Strict-Transport-Security", "Set-Login", "Origin-Agent-Cluster", "Accept-Ch", "Critical-Ch"}

// dropUntrustedResponseHeaders removes untrustedResponseHeaders from h,
// and every "Sec-" response header: the prefix browsers reserve for their
// own features, several of which a response sets for the whole origin
// (Device Bound Session Credentials' Sec-Session-Registration registers a
// session covering the portal; fresh attack pass 12, A06). A name list
// alone misses the next such feature; the prefix does not. The WebSocket
// handshake's own (RFC 6455 §11.3: Sec-WebSocket-Accept, -Protocol,
// -Extensions, -Version) stay on the handshake's answer: without them the
// browser refuses every WebSocket of the route.
//
// They stay on a 101 Switching Protocols only, by name: on any other
// response (a 200, a 1xx) a Sec-WebSocket-* header is no handshake, and a
// prefix exemption would let the next browser feature named under it
// through (fresh attack pass 13, A01).
func dropUntrustedResponseHeaders(h http.Header, status int) {
	for _, k := range untrustedResponseHeaders {
		delete(h, k)
	}
	for k := range h {
		if hasPrefixFold(k, "Sec-") && (status != http.StatusSwitchingProtocols || !webSocketHandshakeHeader(k)) {
			delete(h, k)
		}
	}
}

// webSocketHandshakeHeaders are the response headers of the WebSocket
// opening handshake (RFC 6455 §11.3.2-§11.3.5).
var webSocketHandshakeHeaders = [...]string{"Sec-WebSocket-Accept", "Sec-WebSocket-Protocol", "Sec-WebSocket-Extensions", "Sec-WebSocket-Version"}

// webSocketHandshakeHeader reports whether name is one of
// webSocketHandshakeHeaders, in any ASCII case.
func webSocketHandshakeHeader(name string) bool {
	for _, n := range webSocketHandshakeHeaders {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// hasPrefixFold reports whether s begins with prefix in any ASCII case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// applyUntrustedPolicy applies the route's response policy for the
// portal's origin to the upstream's response headers h.
func (rt *route) applyUntrustedPolicy(h http.Header, status int) {
	if !rt.session {
		dropUntrustedResponseHeaders(h, status)
	}
	if rt.csp != "" {
		// Added as a policy of its own: the upstream's policies still
		// apply, every one must allow (CSP 3 §8.1).
		h["Content-Security-Policy"] = append(h["Content-Security-Policy"], rt.csp)
	}
}

// problemUpgradeOrigin answers a WebSocket upgrade from a foreign page on
// a route that turns the portal's cookie into a credential (cross-site
// WebSocket hijacking: browsers send cookies with any page's WebSocket and
// let the page read the replies).
var problemUpgradeOrigin = problem{Title: "Origem não permitida", Status: http.StatusForbidden,
	Detail: "Esta conexão WebSocket usa a sessão do portal e só é aceita a partir de páginas do próprio endereço ou das origens permitidas para esta rota."}

// upgradeOriginAllowed answers 403 and returns false for an upgrade the
// route would tunnel, on a route that forwards the session, whose Origin
// is neither the request's own origin nor one of the route's CORS
// allowed_origins (exact origins; "*" and patterns do not count, since
// CORS without credentials never sends cookies and a WebSocket always
// does). A request without Origin is not from a browser page and passes,
// as gorilla/websocket's default CheckOrigin does; "null" is refused.
func (s *Server) upgradeOriginAllowed(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	rt := ex.route
	if !rt.session || len(r.Header["Upgrade"]) == 0 || !rt.allowsUpgrade(r.Header) {
		return true
	}
	origins := r.Header["Origin"]
	if len(origins) == 0 {
		return true
	}
	if len(origins) == 1 && (s.ownOrigin(r, ex, origins[0]) || rt.upgradeOrigins[strings.ToLower(origins[0])]) {
		return true
	}
	writeProblem(w, problemUpgradeOrigin, ex.id)
	return false
}

// ownOrigin reports whether origin is the request's own: the scheme the
// client used (TLS here, or a trusted proxy's X-Forwarded-Proto) and its
// Host (or a trusted proxy's single X-Forwarded-Host), default ports
// ignored, case-insensitively.
func (s *Server) ownOrigin(r *http.Request, ex *exchange, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return false
	}
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	hosts := []string{r.Host}
	if ex.trusted {
		if v := r.Header.Get("X-Forwarded-Proto"); v == "http" || v == "https" {
			proto = v
		}
		if v := r.Header["X-Forwarded-Host"]; len(v) == 1 && v[0] != "" {
			hosts = append(hosts, v[0])
		}
	}
	if !strings.EqualFold(u.Scheme, proto) {
		return false
	}
	want := originHost(proto, u.Host)
	for _, h := range hosts {
		if originHost(proto, h) == want {
			return true
		}
	}
	return false
}

// originHost lower-cases host and drops the scheme's default port.
func originHost(scheme, host string) string {
	host = strings.ToLower(host)
	if scheme == "https" {
		return strings.TrimSuffix(host, ":443")
	}
	return strings.TrimSuffix(host, ":80")
}

// upgradeOriginSet is the set of a CORS policy's exact allowed origins, in
// lower case; nil without a policy.
func upgradeOriginSet(p *CORSPolicy) map[string]bool {
	if p == nil {
		return nil
	}
	set := map[string]bool{}
	for _, o := range p.AllowedOrigins {
		if o != "*" && !strings.Contains(o, "*") && o != "null" {
			set[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
		}
	}
	return set
}
