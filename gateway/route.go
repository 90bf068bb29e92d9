package gateway

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/olp-edu/borda/cookies"
)

// route is one compiled entry of the route table (an Options Route with
// the per-route handlers built).
type route struct {
	// Name labels metrics, logs and telemetry.
	Name string
	// Hosts as configured (exact or "*.example.org"; empty: any host).
	Hosts []string
	// Prefix is the decoded path prefix without a trailing slash ("/" for
	// all paths).
	Prefix string
	// Upstream is the parsed upstream URL.
	Upstream *url.URL

	stripPrefix   bool
	preserveHost  bool
	timeout       time.Duration
	exposeHeaders bool
	varyOrigin    bool
	forward       []cookies.Forward
	// session: the route hands its upstream the portal's session
	// (cookies.ForwardsSession); false makes it untrusted (untrusted.go).
	session bool
	// cookiePath is the Path every Set-Cookie of a route that does not
	// forward the session is confined to (confineSetCookie): the route's
	// prefix, escaped; "" when it cannot be one (then such cookies go).
	cookiePath string
	// csp is the Content-Security-Policy sandbox added to its responses
	// ("" none; sandboxHeader).
	csp string
	// upgradeOrigins are the exact CORS allowed_origins, lower case, a
	// WebSocket upgrade of a session route may come from besides its own.
	upgradeOrigins map[string]bool
	setCookie      cookies.ResponsePolicy
	// escapedSlashes is the route's escaped_slashes (reject or keep;
	// under a top-level unescape nothing escaped reaches the route).
	escapedSlashes slashAction
	// upgrades are the Upgrade protocols tunnelled (default websocket).
	upgrades []string
	// metrics are the route's request metrics (label Name).
	metrics *labelMetrics

	// handler serves a matched request: CORS (when configured) → identity
	// → rate limit → proxy.
	handler http.Handler
}

// router picks the Route of a request: exact host over the longest
// "*.domain" wildcard over any host; inside the host tier that matched,
// the longest whole-segment path prefix; configuration order breaks ties.
// A host tier whose routes match no path falls through to the next tier.
type router struct {
	exact map[string]*tier
	wild  []wildcard // longest suffix first
	any   *tier
}

type wildcard struct {
	suffix string // ".example.org"
	*tier
}

// tier is the routes of one host tier in match order (longest prefix
// first, configuration order among equal lengths), with their pathTrie
// when there are enough of them for a walk to beat a scan.
type tier struct {
	routes []*route
	trie   *pathTrie
}

func newTier(routes []*route) *tier {
	slices.SortStableFunc(routes, func(a, b *route) int { return cmp.Compare(len(b.Prefix), len(a.Prefix)) })
	t := &tier{routes: routes}
	if len(routes) >= trieMinRoutes {
		t.trie = newPathTrie(routes)
	}
	return t
}

// match returns the tier's route for the escaped path p and the escaped
// rest of p after its prefix; nil when none matches (also for a nil tier).
func (t *tier) match(p string) (*route, string) {
	switch {
	case t == nil:
		return nil, ""
	case t.trie != nil:
		return t.trie.match(p)
	}
	return matchIn(t.routes, p)
}

func newRouter(routes []*route) *router {
	exact, wild := map[string][]*route{}, map[string][]*route{}
	var anyHost []*route
	for _, r := range routes {
		if len(r.Hosts) == 0 {
			anyHost = append(anyHost, r)
		}
		for _, h := range r.Hosts {
			h = strings.TrimSuffix(strings.ToLower(h), ".")
			if suffix, ok := strings.CutPrefix(h, "*"); ok {
				wild[suffix] = append(wild[suffix], r)
			} else {
				exact[h] = append(exact[h], r)
			}
		}
	}
	rt := &router{exact: make(map[string]*tier, len(exact))}
	for h, rs := range exact {
		rt.exact[h] = newTier(rs)
	}
	for suffix, rs := range wild {
		rt.wild = append(rt.wild, wildcard{suffix: suffix, tier: newTier(rs)})
	}
	slices.SortStableFunc(rt.wild, func(a, b wildcard) int {
		return cmp.Or(cmp.Compare(len(b.suffix), len(a.suffix)), strings.Compare(a.suffix, b.suffix))
	})
	if len(anyHost) > 0 {
		rt.any = newTier(anyHost)
	}
	return rt
}

// match returns the route for host (the request's Host, port and trailing
// dot ignored, case-insensitive) and the escaped path, with the escaped
// rest of the path after the route's prefix; nil when no route matches.
func (rt *router) match(host, escapedPath string) (*route, string) {
	host = normalizeHost(host)
	if r, rest := rt.exact[host].match(escapedPath); r != nil {
		return r, rest
	}
	for _, w := range rt.wild {
		if len(host) > len(w.suffix) && strings.HasSuffix(host, w.suffix) {
			if r, rest := w.match(escapedPath); r != nil {
				return r, rest
			}
		}
	}
	return rt.any.match(escapedPath)
}

func matchIn(routes []*route, p string) (*route, string) {
	for _, r := range routes {
		if rest, ok := matchPrefix(p, r.Prefix); ok {
			return r, rest
		}
	}
	return nil, ""
}

// normalizeHost lower-cases host and strips its port and trailing dot:
// "API.Example.org.:8443" → "api.example.org", "[::1]:80" → "::1".
func normalizeHost(h string) string {
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			h = h[1:i]
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.IndexByte(h, ':') == i {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
