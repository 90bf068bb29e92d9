package telemetry

import "strings"

// maxTemplateLen bounds a path template in bytes; a longer one counts as
// "{route}:other" (a key is no place for a 4 KB path).
const maxTemplateLen = 256

// minHexIDLen is the shortest all-hex segment taken for an id (a 64-bit id
// in hex; Mongo ObjectIDs have 24, SHA-1s 40). Shorter hex-looking words
// ("cafe", "added") stay as they are.
const minHexIDLen = 16

// Template returns path with every segment that looks like an id, a
// token or personal data replaced by "{id}", and every segment's path
// parameters (";jsessionid=…", RFC 3986 §3.3) dropped, so a bearer
// secret or an e-mail address in a path never becomes a key or a
// gateway_metrics row (fresh attack passes A051, A35) and ";<n>" cannot
// make distinct endpoints (A36). A segment is "{id}" when it is
// all-digit ("42"), a UUID in its 8-4-4-4-12 hex form (RFC 9562), all-hex
// of at least 16 characters, token-like (isToken: magic-login, password
// reset, invite and verification links, JWTs), holds such a token beside
// other characters (hasSecretRun: "MQ:1sQDFd:<signature>"), or holds encoded or
// personal material (isEncoded: '=', '+', ',' or '@', so padded or
// standard base64, a "k=v" parameter, an e-mail address; a document
// number such as a CPF, "123.456.789-09"). A query or fragment is cut
// off, and an empty path is "/". It allocates only when a segment is
// replaced or cut.
//
//	/api/alunos/42/notas                       → /api/alunos/{id}/notas
//	/v1/files/0b7e5e0e-58a4-4b1c-9a0e-3f1c...  → /v1/files/{id}
//	/auth/magic/Zx9_3kLq-8vT2mNbR7wYp4Qs      → /auth/magic/{id}
//	/app;jsessionid=9A3F2B7C1D4E/home          → /app/home
//	/magic/dGhpcyBpcyBhIHNlY3JldA==            → /magic/{id}
func Template(path string) string {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if path == "" {
		return "/"
	}
	var b strings.Builder
	start := 0 // start of the segment being looked at
	done := 0  // path[:done] is already in b
	for i := 0; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		seg := path[start:i]
		params := strings.IndexByte(seg, ';')
		if params >= 0 {
			seg = seg[:params]
		}
		if id := isID(seg); id || params >= 0 {
			if b.Len() == 0 {
				b.Grow(len(path))
			}
			b.WriteString(path[done:start])
			if id {
				b.WriteString("{id}")
			} else {
				b.WriteString(seg)
			}
			done = i
		}
		start = i + 1
	}
	if done == 0 {
		return path
	}
	b.WriteString(path[done:])
	if b.Len() == 0 { // ";x": nothing but a parameter
		return "/"
	}
	return b.String()
}

// isID reports whether a path segment (without its parameters) is an id:
// digits only, a UUID, at least minHexIDLen hex digits, a token
// (isToken) or encoded or personal material (isEncoded).
func isID(seg string) bool {
	if seg == "" {
		return false
	}
	if isUUID(seg) || isToken(seg) || isEncoded(seg) || hasSecretRun(seg) {
		return true
	}
	digits := true
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !isHex(c) {
			return false
		}
		if c < '0' || c > '9' {
			digits = false
		}
	}
	return digits || len(seg) >= minHexIDLen
}

// minDocumentDigits is the fewest digits a segment of digits and
// separators needs to be a document number (isEncoded): a CPF has 11, a
// CNPJ 14, a phone number 10 or more, a date 8; "v1.2.3" and "2.0" stay.
const minDocumentDigits = 6

// isEncoded reports whether seg (a decoded path segment) holds material
// no endpoint name does: '=' (base64 padding, a "k=v" parameter), '+'
// (standard base64, a phone number), ',' (lists, signed values), '@' (an
// e-mail address), or only digits and the separators ".-_ ()" with at
// least minDocumentDigits digits (a CPF "123.456.789-09", a CNPJ, a phone
// number, a date).
func isEncoded(seg string) bool {
	if strings.ContainsAny(seg, "=+,@") {
		return true
	}
	digits := 0
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; {
		case '0' <= c && c <= '9':
			digits++
		case c == '.' || c == '-' || c == '_' || c == ' ' || c == '(' || c == ')':
		default:
			return false
		}
	}
	return digits >= minDocumentDigits
}

// minTokenLen and longTokenLen bound isToken: a segment of at least
// minTokenLen token characters holding both a letter and a digit, or of at
// least longTokenLen token characters, is a token. Words and slugs without
// digits stay ("relatorio-mensal-consolidado").
const (
	minTokenLen  = 16
	longTokenLen = 32
)

// isToken reports whether seg looks like a secret or an opaque id: only
// base64url, base36 or JWT characters ([A-Za-z0-9_.~-]), and either at
// least longTokenLen of them or at least minTokenLen with a letter and a
// digit ("c4rz9u-2f5a6b7c8d9e0f1a2b3c", Django's password reset token).
func isToken(seg string) bool {
	if len(seg) < minTokenLen {
		return false
	}
	letter, digit := false, false
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; {
		case '0' <= c && c <= '9':
			digit = true
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			letter = true
		case c == '_' || c == '-' || c == '.' || c == '~':
		default:
			return false
		}
	}
	return len(seg) >= longTokenLen || (letter && digit)
}

// hasSecretRun reports whether seg holds a run of ASCII letters and
// digits that looks like a secret wherever it sits in the segment: at
// least minTokenLen of them with a letter and a digit, or at least
// longTokenLen. A secret beside a character isToken does not take (the
// ':' of Django's signing.dumps "MQ:1sQDFd:<signature>", any of RFC
// 3986's sub-delims "!$'()*", an emoji) was a key and a row verbatim
// (fresh attack pass 7 T01/T02). Runs stop at '-', '_', '.' and '~' too,
// so a slug's words ("relatorio-2024-especial", with accents or not)
// are short runs and stay.
func hasSecretRun(seg string) bool {
	run, letter, digit := 0, false, false
	for i := 0; i <= len(seg); i++ {
		var c byte
		if i < len(seg) {
			c = seg[i]
		}
		switch {
		case '0' <= c && c <= '9':
			run, digit = run+1, true
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			run, letter = run+1, true
		default:
			if run >= longTokenLen || (run >= minTokenLen && letter && digit) {
				return true
			}
			run, letter, digit = 0, false, false
		}
	}
	return false
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// maxRefusedTemplates caps the distinct templates refused requests
// (refusedStatus) may add per route per minute, apart from the route's
// cap for answered ones: a blocked /login stays visible, and a client's
// stream of 429'd or 404'd paths adds at most this many keys a minute,
// never taking an answered endpoint's place.
const maxRefusedTemplates = 16

// knownMinutes is how long a known template (endpointCap) keeps its
// reserved place without being answered: an hour, the aggregation's
// period.
const knownMinutes = 60

// routeMinute is one route's templates in one minute.
type routeMinute struct {
	placed  map[string]struct{} // templates with a place (served requests)
	refused map[string]struct{} // templates only refused or unserved requests made
	fresh   int                 // placed templates that were not known when placed
}

// endpointCap caps the distinct templates counted per route per minute.
// It belongs to the flusher goroutine (no locking).
//
// Places are first come, first served within a minute, with one
// reservation: a template answered in two different minutes less than
// three minutes apart is known, and a known template always gets its
// place for knownMinutes after it was last answered. Known templates take
// at most three quarters of the cap per route; new ones get what the
// known leave. A client spraying distinct paths at an upstream that
// answers every path (a single-page app's catch-all) makes templates seen
// once, so it fills at most the new places: the route's established
// endpoints keep theirs.
type endpointCap struct {
	max     int
	minutes map[int64]map[string]*routeMinute // minute → route → templates
	// known is route → template → the last minute it got a place.
	known   map[string]map[string]int64
	newest  int64
	invalid int // templates counted as other for being too long or not ValidText
	// overflow counts templates counted as other for being over the cap,
	// refused those counted as refused (refusedStatus, a template not yet
	// a key), both since the last take.
	overflow, refused int
}

func newEndpointCap(max int) *endpointCap {
	return &endpointCap{max: max, minutes: make(map[int64]map[string]*routeMinute), known: make(map[string]map[string]int64)}
}

// maxKnown is the most known templates a route keeps: three quarters of
// the cap (none when the cap is one place).
func (c *endpointCap) maxKnown() int { return c.max * 3 / 4 }

// endpoint returns the route and template to count a request under: the
// event's route (or "unrouted") and its path template, or "other" once the
// route has no place left for it in that minute (counted in overflow), or
// when the template is longer than maxTemplateLen or not ValidText
// (counted in invalid). A request no server answered (served false: the
// gateway's own answers) or a refused one (refusedStatus) never takes a
// place in the route's cap: it counts under a template served requests
// made a key that minute, or adds one of at most maxRefusedTemplates of
// its own, else counts as "refused" (counted in refused). So a client's
// preflights, 429'd or 404'd paths can neither crowd out the route's
// endpoints nor make more than a fixed number of keys a minute, and known
// templates keep their places (endpointCap). Minutes more than two behind
// the newest seen are forgotten.
func (c *endpointCap) endpoint(route, path string, status int, served bool, minute int64) (string, string) {
	if route == "" {
		return unroutedRoute, otherTemplate
	}
	tmpl := Template(path)
	if len(tmpl) > maxTemplateLen || !ValidText(tmpl) {
		// A 4 KB path, "%ff", "%00" or a control character: PostgreSQL
		// would refuse the row, and a key is no place for it
		// (docs/telemetry.md, "Keys").
		c.invalid++
		return route, otherTemplate
	}
	if minute > c.newest {
		c.advance(minute)
	}
	routes := c.minutes[minute]
	if routes == nil {
		routes = make(map[string]*routeMinute)
		c.minutes[minute] = routes
	}
	rm := routes[route]
	if rm == nil {
		rm = &routeMinute{placed: make(map[string]struct{})}
		routes[route] = rm
	}
	if _, ok := rm.placed[tmpl]; ok {
		return route, tmpl
	}
	if !served || refusedStatus(status) {
		if _, ok := rm.refused[tmpl]; ok {
			return route, tmpl
		}
		if len(rm.refused) >= maxRefusedTemplates {
			c.refused++
			return route, refusedTemplate
		}
		if rm.refused == nil {
			rm.refused = make(map[string]struct{})
		}
		rm.refused[tmpl] = struct{}{}
		return route, tmpl
	}
	known := c.known[route]
	if _, ok := known[tmpl]; ok {
		known[tmpl] = minute
		rm.placed[tmpl] = struct{}{}
		return route, tmpl
	}
	if len(rm.placed) >= c.max {
		c.overflow++
		return route, otherTemplate
	}
	if len(known) < c.maxKnown() && c.placedBefore(route, tmpl, minute) {
		// Served in an earlier minute too: known from now on.
		if known == nil {
			known = make(map[string]int64)
			c.known[route] = known
		}
		known[tmpl] = minute
		rm.placed[tmpl] = struct{}{}
		return route, tmpl
	}
	// A new template: the places the route's known templates do not hold.
	if rm.fresh >= c.max-len(known) {
		c.overflow++
		return route, otherTemplate
	}
	rm.placed[tmpl] = struct{}{}
	rm.fresh++
	return route, tmpl
}

// advance makes minute the newest: minutes more than two behind it and
// known templates not answered for knownMinutes are forgotten.
func (c *endpointCap) advance(minute int64) {
	c.newest = minute
	for m := range c.minutes {
		if m < minute-2 {
			delete(c.minutes, m)
		}
	}
	for r, ts := range c.known {
		for t, last := range ts {
			if last <= minute-knownMinutes {
				delete(ts, t)
			}
		}
		if len(ts) == 0 {
			delete(c.known, r)
		}
	}
}

// placedBefore reports whether tmpl got a place on route in one of the
// two minutes before minute (the ones endpointCap still holds).
func (c *endpointCap) placedBefore(route, tmpl string, minute int64) bool {
	for m := minute - 2; m < minute; m++ {
		if rm := c.minutes[m][route]; rm != nil {
			if _, ok := rm.placed[tmpl]; ok {
				return true
			}
		}
	}
	return false
}
