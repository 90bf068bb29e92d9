package telemetry

import "strings"

// maxTemplateLen bounds a path template in bytes; a longer one counts as
// "{route}:other" (a key is no place for a 4 KB path).
const maxTemplateLen = 256

// minHexIDLen is the shortest all-hex segment taken for an id (a 64-bit id
// in hex; Mongo ObjectIDs have 24, SHA-1s 40). Shorter hex-looking words
// ("cafe", "added") stay as they are.
const minHexIDLen = 16

// Template returns path with every segment that looks like an id replaced
// by "{id}": all-digit segments ("42"), UUIDs in their 8-4-4-4-12 hex form
// (RFC 9562) and all-hex segments of at least 16 characters. A query or
// fragment is cut off, and an empty path is "/". It allocates only when a
// segment is replaced.
//
//	/api/alunos/42/notas                       → /api/alunos/{id}/notas
//	/v1/files/0b7e5e0e-58a4-4b1c-9a0e-3f1c...  → /v1/files/{id}
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
		if seg := path[start:i]; isID(seg) {
			if b.Len() == 0 {
				b.Grow(len(path))
			}
			b.WriteString(path[done:start])
			b.WriteString("{id}")
			done = i
		}
		start = i + 1
	}
	if done == 0 {
		return path
	}
	b.WriteString(path[done:])
	return b.String()
}

// isID reports whether a path segment is an id: digits only, a UUID, or
// at least minHexIDLen hex digits.
func isID(seg string) bool {
	if seg == "" {
		return false
	}
	if isUUID(seg) {
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

// refusedKey prefixes, in a minute's map, the route whose templates were
// added by refused requests ('\x00' is in no route name).
const refusedKey = "\x00refused:"

// endpointCap caps the distinct templates counted per route per minute.
// It belongs to the flusher goroutine (no locking).
type endpointCap struct {
	max     int
	minutes map[int64]map[string]map[string]struct{} // minute → route → templates
	newest  int64
	invalid int // templates counted as other for being too long or not ValidText
	// overflow counts templates counted as other for being over the cap,
	// refused those counted as refused (refusedStatus, a template not yet
	// a key), both since the last take.
	overflow, refused int
}

func newEndpointCap(max int) *endpointCap {
	return &endpointCap{max: max, minutes: make(map[int64]map[string]map[string]struct{})}
}

// endpoint returns the route and template to count a request under: the
// event's route (or "unrouted") and its path template, or "other" once the
// route already has max templates in that minute (counted in overflow),
// or when the template is longer than maxTemplateLen or not ValidText
// (counted in invalid). A refused request (refusedStatus) never takes a
// place in the route's cap: it counts under a template answered requests
// made a key that minute, or adds one of at most maxRefusedTemplates of
// its own, else counts as "refused" (counted in refused). So a client's
// 429'd or 404'd paths can neither crowd out the route's endpoints nor
// make more than a fixed number of keys a minute. Minutes more than two
// behind the newest seen are forgotten.
func (c *endpointCap) endpoint(route, path string, status int, minute int64) (string, string) {
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
		c.newest = minute
		for m := range c.minutes {
			if m < minute-2 {
				delete(c.minutes, m)
			}
		}
	}
	routes := c.minutes[minute]
	if routes == nil {
		routes = make(map[string]map[string]struct{})
		c.minutes[minute] = routes
	}
	seen := routes[route]
	if seen == nil {
		seen = make(map[string]struct{})
		routes[route] = seen
	}
	if _, ok := seen[tmpl]; ok {
		return route, tmpl
	}
	if refusedStatus(status) {
		rkey := refusedKey + route
		rseen := routes[rkey]
		if rseen == nil {
			rseen = make(map[string]struct{})
			routes[rkey] = rseen
		}
		if _, ok := rseen[tmpl]; ok {
			return route, tmpl
		}
		if len(rseen) >= maxRefusedTemplates {
			c.refused++
			return route, refusedTemplate
		}
		rseen[tmpl] = struct{}{}
		return route, tmpl
	}
	if len(seen) >= c.max {
		c.overflow++
		return route, otherTemplate
	}
	seen[tmpl] = struct{}{}
	return route, tmpl
}
