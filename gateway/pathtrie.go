package gateway

import "strings"

// trieMinRoutes is the size of a host tier from which its path routes are
// looked up in a pathTrie instead of being scanned in order. A scan of a
// few routes costs less than a walk (matchPrefix rejects most routes at
// their first byte, about 7 ns each; a walk pays one map lookup per path
// segment), so small tables, the common case, keep the scan:
// BenchmarkRouterMatch measures both.
const trieMinRoutes = 8

// pathTrie finds the route of one host tier in a time that depends on the
// path's number of segments, not on the number of routes (issue 28: the
// last of 10 000 routes was 73 µs away by scan). Its answer is exactly
// matchIn's over the same tier (FuzzPathTrieMatchesScan checks it): among
// the routes whose prefix matches the path on whole segments (matchPrefix),
// the one that comes first in the tier's order (longest prefix first,
// configuration order among equal lengths).
//
// A prefix is indexed by its decoded segments. A request segment is
// decoded up to its path parameters (";…" or "%3B…", which matchPrefix
// skips at a prefix segment's end) and looked up as a key; an escaped
// slash decodes to '/', which no indexed segment holds, so it never ends
// a segment nor matches one, and an invalid escape ends the walk, as both
// make matchPrefix fail. A prefix with a segment the walk cannot reproduce
// (empty, or holding ';', which matchPrefix compares literally) is kept
// in odd and checked with matchPrefix itself.
type pathTrie struct {
	root trieNode
	odd  []*route
	// oddAt is the tier position of each route in odd.
	oddAt []int
}

type trieNode struct {
	children map[string]*trieNode
	// route is the first route of the tier whose prefix ends here, at
	// position at in the tier's order; nil when no prefix ends here.
	route *route
	at    int
}

// newPathTrie indexes routes, a tier already in match order (longest
// prefix first, stable).
func newPathTrie(routes []*route) *pathTrie {
	t := &pathTrie{}
	for at, r := range routes {
		segs, ok := prefixSegments(r.Prefix)
		if !ok {
			t.odd = append(t.odd, r)
			t.oddAt = append(t.oddAt, at)
			continue
		}
		n := &t.root
		for _, s := range segs {
			c := n.children[s]
			if c == nil {
				if n.children == nil {
					n.children = map[string]*trieNode{}
				}
				c = &trieNode{}
				n.children[s] = c
			}
			n = c
		}
		if n.route == nil {
			n.route, n.at = r, at
		}
	}
	return t
}

// prefixSegments splits a normalized, decoded prefix into its segments
// ("/" → none, "/api/v1" → api, v1); false when a segment is empty or
// holds ';'.
func prefixSegments(prefix string) ([]string, bool) {
	if prefix == "/" {
		return nil, true
	}
	if prefix == "" || prefix[0] != '/' {
		return nil, false
	}
	segs := strings.Split(prefix[1:], "/")
	for _, s := range segs {
		if s == "" || strings.IndexByte(s, ';') >= 0 {
			return nil, false
		}
	}
	return segs, true
}

// match returns what matchIn returns for the tier the trie was built
// from: the route and the escaped rest of p after its prefix.
func (t *pathTrie) match(p string) (*route, string) {
	var best *route
	bestAt, rest := -1, ""
	n := &t.root
	if n.route != nil {
		best, bestAt, rest = n.route, n.at, p
	}
	var buf [128]byte
	for i := 0; n.children != nil && i < len(p) && p[i] == '/'; {
		end := len(p)
		if k := strings.IndexByte(p[i+1:], '/'); k >= 0 {
			end = i + 1 + k
		}
		key, ok := segmentKey(p[i+1:end], buf[:0])
		if !ok {
			break
		}
		c := n.children[string(key)]
		if c == nil {
			break
		}
		n, i = c, end
		if c.route != nil && (bestAt < 0 || c.at < bestAt) {
			best, bestAt, rest = c.route, c.at, p[end:]
		}
	}
	for j, r := range t.odd {
		if bestAt >= 0 && t.oddAt[j] > bestAt {
			break
		}
		if r2, ok := matchPrefix(p, r.Prefix); ok {
			return r, r2
		}
	}
	return best, rest
}

// segmentKey appends to buf the decoded form of the escaped request
// segment seg up to its path parameters (a ';' or "%3B", any case), the
// form an indexed prefix segment is compared with. False for an invalid
// or truncated escape before the parameters, as matchPrefix fails there.
// A segment without '%' or ';' is returned without copying.
func segmentKey(seg string, buf []byte) ([]byte, bool) {
	if strings.IndexByte(seg, '%') < 0 {
		if k := strings.IndexByte(seg, ';'); k >= 0 {
			seg = seg[:k]
		}
		return append(buf, seg...), true
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch c {
		case ';':
			return buf, true
		case '%':
			if i+2 >= len(seg) {
				return nil, false
			}
			hi, ok1 := unhex(seg[i+1])
			lo, ok2 := unhex(seg[i+2])
			if !ok1 || !ok2 {
				return nil, false
			}
			if c = hi<<4 | lo; c == ';' {
				return buf, true // "%3B": parameters, as skipParams reads them
			}
			i += 2
		}
		buf = append(buf, c)
	}
	return buf, true
}
