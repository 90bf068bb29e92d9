package gateway

import (
	"net/netip"
	"net/url"
	"time"

	"github.com/olp-edu/borda/cookies"
)

// Options is the gateway's part of the configuration, typed and already
// validated: cmd/borda maps the configuration file into it
// (docs/architecture.md, "Options"). New refuses only what it cannot
// build (a route without an absolute upstream URL); every other check
// (names, hosts, origins, overlapping prefixes) is the caller's. The
// defaults are the configuration's (docs/configuration.md): a zero value
// here means none (no bound, no cap, no grouping), never a second copy of
// a default. The zero value serves no route and trusts no proxy.
type Options struct {
	// Routes is the route table in configuration order (ties between
	// equal prefixes go to the earlier route).
	Routes []Route
	// TrustedProxies are the peers whose client-IP headers are believed
	// (docs/edge.md, "Client IP"); empty: the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// ClientIPHeader is a single-value header ("X-Real-IP",
	// "CF-Connecting-IP") read from a trusted peer before X-Forwarded-For;
	// empty: X-Forwarded-For only.
	ClientIPHeader string
	// IPv6PrefixLen groups IPv6 clients for rate limits and the per-IP
	// connection cap, in bits (64: per /64); 0 or 128: each address alone.
	IPv6PrefixLen int
	// KeepUnderscoreHeaders forwards request headers whose names hold '_'
	// (headers_with_underscores: allow); false drops them before the
	// upstream.
	KeepUnderscoreHeaders bool
	// EscapedSlashes is what a path holding %2F, %5C or '\' gets
	// (docs/edge.md, "Paths"); SlashesDefault is SlashesReject.
	EscapedSlashes SlashPolicy
	// Pprof gates /debug/pprof/ on the admin listener.
	Pprof Pprof
	// BodyTimeout and BodyMinRate (bytes/s) bound the upload of a body on
	// a proxied route (docs/configuration.md, server.body_timeout and
	// server.body_min_rate); BodyTimeout 0: no bound, BodyMinRate 0: no
	// minimum rate.
	BodyTimeout time.Duration
	// SendTimeout bounds each write of a proxied response to the client
	// (server.send_timeout; 0: no bound): a client that reads nothing
	// for that long is disconnected and the upstream released.
	SendTimeout time.Duration
	BodyMinRate int64
	// MaxConnections caps the public listener's open connections
	// (Server.Listener); 0: no cap.
	MaxConnections int
	// MaxConnectionsPerIP caps the public listener's open connections
	// from one client IP (the TCP peer; trusted proxies exempt); 0: no
	// per-IP cap.
	MaxConnectionsPerIP int
	// Deny is the deny lists in force from the start (SetDeny swaps
	// them); the zero value denies nothing.
	Deny Deny
}

// Route is one entry of the route table.
type Route struct {
	// Name labels metrics, logs, telemetry and rate-limit subjects; empty:
	// "route<index>".
	Name string
	// Hosts are exact hosts or "*.domain" wildcards, matched
	// case-insensitively without port; empty: any host.
	Hosts []string
	// PathPrefix is the whole-segment prefix matched ("/api"); empty: "/".
	PathPrefix string
	// StripPrefix removes PathPrefix before the upstream's base path.
	StripPrefix bool
	// PreserveHost sends the client's Host instead of the upstream's.
	PreserveHost bool
	// Upstream is where matched requests go.
	Upstream Upstream
	// ExposeHeaders adds the rate-limit headers to allowed responses.
	ExposeHeaders bool
	// CORS is the route's CORS policy; nil: no CORS handling.
	CORS *CORSPolicy
	// Cookies is the route's cookie policy, both ways.
	Cookies RouteCookies
	// EscapedSlashes overrides Options.EscapedSlashes for this route with
	// SlashesReject or SlashesKeep; ignored under a top-level
	// SlashesUnescape (no escaped slash is left to the route).
	EscapedSlashes SlashPolicy
	// Sandbox is the route's Content-Security-Policy sandbox
	// (docs/edge.md, "Untrusted routes"): "" adds "sandbox" to the
	// responses of a route whose Cookies.Forward does not hand over the
	// session (cookies.ForwardsSession) and nothing to one that does;
	// "off" adds nothing, "on" adds "sandbox", and a space-separated list
	// of sandbox tokens ("allow-scripts allow-popups") adds "sandbox"
	// with them. Validated by the caller (configs).
	Sandbox string
	// Upgrades are the Upgrade protocols tunnelled (case-insensitive);
	// nil or empty: none (routes[].upgrades defaults to websocket). "h2c"
	// is never tunnelled.
	Upgrades []string
}

// Upstream is a route's backend.
type Upstream struct {
	// URL is the absolute http(s) URL; its path is the base path requests
	// are joined to.
	URL *url.URL
	// Timeout bounds the wait for the upstream's response headers
	// (routes[].timeout); 0: no bound.
	Timeout time.Duration
	// FlushInterval is httputil.ReverseProxy's (0: flush on buffer
	// fill; negative: after every write). Streams flush at once anyway.
	FlushInterval time.Duration
}

// RouteCookies is the cookie policy of a route (docs/edge.md, "Cookies").
type RouteCookies struct {
	// Forward lists the olp_* cookies the upstream gets, as cookies or as
	// its Bearer token; nil or empty: none.
	Forward []cookies.Forward
	// Domain replaces the Domain attribute of the upstream's Set-Cookie
	// lines that have one; empty: left as sent.
	Domain string
	// SameSite is what olp_* cookies leave with ("Lax" when empty,
	// "Strict", "None").
	SameSite string
}

// CORSPolicy is a route's CORS policy, answered at the edge with rs/cors
// (docs/edge.md, "CORS"). Origins are validated by the caller (exact
// origins when AllowCredentials).
type CORSPolicy struct {
	AllowedOrigins []string
	// AllowedMethods: rs/cors's simple methods (GET, POST, HEAD) when
	// empty.
	AllowedMethods []string
	AllowedHeaders []string
	// ExposedHeaders are the response headers scripts may read; empty:
	// none (the configuration's default lists the rate-limit headers and
	// X-Request-Id).
	ExposedHeaders   []string
	AllowCredentials bool
	// MaxAge is how long a browser may cache a preflight (whole seconds);
	// 0: no Access-Control-Max-Age.
	MaxAge time.Duration
}

// SlashPolicy is an escaped_slashes policy (docs/edge.md, "Paths").
type SlashPolicy uint8

const (
	// SlashesDefault is the zero value: SlashesReject at the top level,
	// the top-level policy on a route.
	SlashesDefault SlashPolicy = iota
	// SlashesReject answers 400.
	SlashesReject
	// SlashesUnescape turns every escaped slash and backslash into "/"
	// before dot segments are resolved and the route is matched (top
	// level only).
	SlashesUnescape
	// SlashesKeep forwards them as sent (a raw '\' as %5C); a dot segment
	// hidden behind one is still refused.
	SlashesKeep
)

// action is the path policy's own value; SlashesDefault is reject.
func (p SlashPolicy) action() slashAction {
	switch p {
	case SlashesUnescape:
		return slashUnescape
	case SlashesKeep:
		return slashKeep
	}
	return slashReject
}

// Pprof gates net/http/pprof on the admin listener (docs/configuration.md,
// admin_pprof).
type Pprof struct {
	// Mode is who may reach it.
	Mode PprofMode
	// Token is the Bearer token of PprofToken; an empty one turns pprof
	// off. Only its SHA-256 digest is kept.
	Token string
}

// PprofMode says who may reach /debug/pprof/.
type PprofMode uint8

const (
	// PprofLoopback (the zero value) serves peers whose TCP address is
	// loopback and answers 404 to others.
	PprofLoopback PprofMode = iota
	// PprofToken serves any peer with "Authorization: Bearer <Token>" and
	// answers 401 to others.
	PprofToken
	// PprofOff does not route it (404).
	PprofOff
)
