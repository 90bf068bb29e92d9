package configs

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Route maps requests to an upstream. Matching: webhook paths first, then
// the most specific host (exact over *.wildcard over any), then the longest
// path_prefix.
type Route struct {
	// Name identifies the route in metrics, logs and telemetry keys
	// (letters, digits, '-' and '_'; required, unique).
	Name string `yaml:"name"`
	// Hosts are exact host names or "*.example.org" wildcards (which match
	// one or more labels before example.org, not example.org itself), or IP
	// addresses; bare names only: a scheme, port, path or space is refused
	// (the request's Host is matched without its port). Empty: any host.
	Hosts []string `yaml:"hosts"`
	// PathPrefix is matched on whole segments: "/api" matches /api and
	// /api/x, not /apix (default "/").
	PathPrefix string `yaml:"path_prefix"`
	// Upstream is the absolute http(s) URL requests are proxied to; its
	// path is joined with the request path.
	Upstream string `yaml:"upstream"`
	// StripPrefix removes PathPrefix before joining with the upstream path.
	StripPrefix bool `yaml:"strip_prefix"`
	// PreserveHost sends the client's Host upstream; default false sends the
	// upstream's host and the original in X-Forwarded-Host.
	PreserveHost bool `yaml:"preserve_host"`
	// Timeout bounds the whole upstream exchange up to the response headers
	// (default 30s); passing it answers 504.
	Timeout Duration `yaml:"timeout"`
	// FlushInterval is how often the response body is flushed to the client
	// while copying (default 0: the standard library's choice, which
	// flushes text/event-stream and unknown-length streams at once; -1ns
	// flushes after every write).
	FlushInterval Duration `yaml:"flush_interval"`
	// RateLimits names the rules that apply to this route, besides rules
	// that name this route (or "*") in their own `routes`.
	RateLimits []string `yaml:"rate_limits"`
	// ExposeHeaders adds the rate-limit headers to allowed responses too
	// (they are always on 429s).
	ExposeHeaders bool `yaml:"expose_headers"`
	// CORS names a policy from cors.policies. Empty: no CORS handling.
	CORS string `yaml:"cors"`
	// Cookies says which cookies the upstream gets and how Set-Cookie
	// comes back.
	Cookies RouteCookies `yaml:"cookies"`
	// EscapedSlashes overrides the top-level escaped_slashes for this
	// route: reject (400) or keep (for an upstream whose identifiers hold
	// %2F, such as "/projects/group%2Fname"; a dot segment hidden behind
	// an escaped slash is still refused). Empty: the top-level policy.
	// Not allowed when the top level is unescape (nothing escaped is
	// left by the time the route is known).
	EscapedSlashes string `yaml:"escaped_slashes"`
	// Deny lists applied to this route's requests, besides the top-level
	// deny (docs/edge.md, "Deny lists").
	Deny Deny `yaml:"deny"`
	// Upgrades are the Upgrade protocols (RFC 9110 §7.8) the route
	// tunnels to its upstream, matched case-insensitively against a
	// request's single Upgrade token (default [websocket]; [] allows
	// none). Any other Upgrade, and every HTTP2-Settings header, is
	// removed and the request proxied as a plain HTTP/1.1 request. h2c is
	// refused here: a tunnelled h2c connection would carry requests the
	// gateway never routes, limits or rewrites.
	Upgrades []string `yaml:"upgrades"`
	// Sandbox is the Content-Security-Policy sandbox added to the route's
	// responses (docs/edge.md, "Untrusted routes"). Empty (default): a
	// route whose cookies.forward hands over no session (no entry with as:
	// authorization, no olp_auth cookie) gets "sandbox", a route that does
	// gets none; "off": none; "on": "sandbox"; or a space-separated list of
	// sandbox tokens (allow-scripts, allow-forms, allow-popups, ...) added
	// after "sandbox". allow-same-origin is refused: it would give the page
	// the portal's origin back.
	Sandbox string `yaml:"sandbox"`

	// UpstreamURL is Upstream parsed by Validate.
	UpstreamURL *url.URL `yaml:"-"`
}

// DefaultExposedHeaders are the response headers a CORS policy that
// names none lets scripts read: the rate-limit headers (legacy
// X-RateLimit-* and the IETF RateLimit fields), Retry-After and the
// request id (the same list as gateway's default).
func DefaultExposedHeaders() []string {
	return []string{
		"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
		"X-RateLimit-Would-Block", "RateLimit", "RateLimit-Policy",
		"Retry-After", "X-Request-Id",
	}
}

// RouteCookies is a route's cookie policy.
type RouteCookies struct {
	// defaulted: Forward was absent and Validate filled in the default
	// (sessionByDefault warns when that hands the session to several
	// upstreams).
	defaulted bool

	// Forward lists the cookies sent upstream; every olp_* cookie not listed
	// is removed, and the route's upstream may set (Set-Cookie) only the
	// olp_* cookies listed here. Absent: the default, olp_auth as
	// Authorization and olp_mural as a cookie (Validate fills it in, so
	// `config check` prints the effective list); an empty list forwards,
	// and lets the upstream set, no olp_* cookie.
	Forward []CookieForward `yaml:"forward"`
	// Domain rewrites the Domain attribute of upstream Set-Cookie headers
	// (as nginx's proxy_cookie_domain). Empty: left as sent.
	Domain string `yaml:"domain"`
	// SameSite for olp_* cookies leaving the gateway: Lax (default), Strict
	// or None.
	SameSite string `yaml:"same_site"`
}

// CookieForward maps one request cookie to what the upstream receives.
type CookieForward struct {
	// Cookie is the cookie name.
	Cookie string `yaml:"cookie"`
	// As is "authorization" (sent as Authorization: Bearer <value> when the
	// request has no Authorization of its own) or empty (sent as the
	// cookie it is).
	As string `yaml:"as"`
}

// Auth configures verified identity (usuario_id, escola_id) for user and
// escola rate limits and telemetry.
type Auth struct {
	// JWTSecretEnv names the environment variable holding the HS256 secret
	// (default AUTH_JWT_SECRET).
	JWTSecretEnv string `yaml:"jwt_secret_env"`
	// JWKSURL is the JWKS document for RS256/ES256 (AUTH_JWKS_URL
	// overrides); keys are fetched off the request path and cached.
	JWKSURL string `yaml:"jwks_url"`
	// UserClaim is the claim path holding usuario_id (default "sub").
	UserClaim string `yaml:"user_claim"`
	// EscolaClaim is the dotted claim path holding escola_id (default
	// "app_metadata.escola_id").
	EscolaClaim string `yaml:"escola_claim"`
	// Leeway is the clock skew allowed on exp, nbf and iat (default 30s).
	Leeway Duration `yaml:"leeway"`
	// RequireExp makes a token without an exp claim unverified (anonymous);
	// default true. With false, a token without exp verifies (exp is still
	// checked when present).
	RequireExp bool `yaml:"require_exp"`
	// Issuer, when set, must equal the token's iss claim (a token without
	// iss is unverified).
	Issuer string `yaml:"issuer"`
	// Audience, when set, must be the token's aud claim or one of its
	// values (a token without aud is unverified).
	Audience string `yaml:"audience"`
	// JWKSRefresh is how often the JWKS document is fetched again (default
	// 1m, at least 1s): a key removed from it stops verifying within this
	// interval. A token whose kid is not in the key set also triggers a
	// fetch, at most once every 10 seconds.
	JWKSRefresh Duration `yaml:"jwks_refresh"`

	// JWTSecret is read from the variable named by JWTSecretEnv.
	JWTSecret Secret `yaml:"-"`
}

func defaultAuth() Auth {
	return Auth{
		JWTSecretEnv: "AUTH_JWT_SECRET",
		UserClaim:    "sub",
		EscolaClaim:  "app_metadata.escola_id",
		Leeway:       Duration(30e9),
		RequireExp:   true,
		JWKSRefresh:  Duration(60e9),
	}
}

// DefaultCookieForward is the cookies.forward of a route that does not set
// the key: olp_auth as Authorization: Bearer, olp_mural as the cookie it is.
func DefaultCookieForward() []CookieForward {
	return []CookieForward{{Cookie: "olp_auth", As: "authorization"}, {Cookie: "olp_mural"}}
}

// CORS holds named CORS policies that routes refer to.
type CORS struct {
	Policies map[string]CORSPolicy `yaml:"policies"`
}

// CORSPolicy is one CORS policy (served by github.com/rs/cors).
type CORSPolicy struct {
	// AllowedOrigins are exact origins ("https://portal.example.org").
	// Patterns and "*" are refused when AllowCredentials is set, and so is
	// "null".
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowedMethods (default GET, POST, HEAD).
	AllowedMethods []string `yaml:"allowed_methods"`
	// AllowedHeaders the browser may send.
	AllowedHeaders []string `yaml:"allowed_headers"`
	// ExposedHeaders scripts may read (default: the rate-limit headers and
	// X-Request-Id).
	ExposedHeaders []string `yaml:"exposed_headers"`
	// AllowCredentials sends Access-Control-Allow-Credentials: true.
	AllowCredentials bool `yaml:"allow_credentials"`
	// MaxAge is how long a preflight may be cached (whole seconds on the
	// wire; default 0: not sent).
	MaxAge Duration `yaml:"max_age"`
}

// validateGateway checks the gateway's sections, in the order
// docs/configuration.md lists them: the client side (escaped slashes,
// IPv6 grouping, trusted proxies), the CORS policies, the routes and the
// token verification.
func (c *Config) validateGateway(p *problems) {
	c.validateClientSide(p)
	c.validateCORS(p)
	c.validateRoutes(p)
	c.validateAuth(p)
}

// validateClientSide checks escaped_slashes, ipv6_prefix_len and
// trusted_proxies, parsing the latter into TrustedPrefixes.
func (c *Config) validateClientSide(p *problems) {
	switch c.EscapedSlashes {
	case "reject", "unescape", "keep":
	case "":
		c.EscapedSlashes = "reject"
	default:
		p.addf("escaped_slashes", "%q: want reject, unescape or keep", c.EscapedSlashes)
	}
	if c.IPv6PrefixLen < 32 || c.IPv6PrefixLen > 128 {
		p.addf("ipv6_prefix_len", "must be between 32 and 128, got %d", c.IPv6PrefixLen)
	}
	c.TrustedPrefixes = c.TrustedPrefixes[:0]
	for i, s := range c.TrustedProxies {
		pfx, err := parsePrefix(s)
		if err != nil {
			p.addf(fmt.Sprintf("trusted_proxies[%d]", i), "%q is not a CIDR or IP address", s)
			continue
		}
		c.TrustedPrefixes = append(c.TrustedPrefixes, pfx)
	}
}

// validateCORS checks each CORS policy's origins, and fills its methods
// and exposed headers when it names none: those defaults live here alone
// (the gateway passes the lists as given), so `config check` prints the
// lists in force.
func (c *Config) validateCORS(p *problems) {
	for name, pol := range c.CORS.Policies {
		field := "cors.policies." + name
		if len(pol.AllowedMethods) == 0 {
			pol.AllowedMethods = []string{"GET", "POST", "HEAD"}
		}
		if len(pol.ExposedHeaders) == 0 {
			pol.ExposedHeaders = DefaultExposedHeaders()
		}
		c.CORS.Policies[name] = pol
		if len(pol.AllowedOrigins) == 0 {
			p.addf(field+".allowed_origins", "must list at least one origin")
		}
		for i, o := range pol.AllowedOrigins {
			if msg := checkOrigin(o, pol.AllowCredentials); msg != "" {
				p.addf(fmt.Sprintf("%s.allowed_origins[%d]", field, i), "%s", msg)
			}
		}
	}
}

// checkOrigin returns why o cannot be an allowed origin ("" when it can):
// a wildcard, a pattern or "null" with credentials, or anything but
// scheme://host[:port].
func checkOrigin(o string, credentials bool) string {
	switch {
	case strings.Contains(o, "*") && credentials:
		return fmt.Sprintf("%q: wildcard or pattern origins are refused with allow_credentials (list exact origins)", o)
	case o == "null" && credentials:
		return `"null" is refused with allow_credentials`
	case o != "*" && !strings.Contains(o, "*") && o != "null":
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Sprintf("%q is not an origin (scheme://host[:port])", o)
		}
	}
	return ""
}

// validateRoutes checks every route, section by section, and that no two
// claim the same host and path prefix; problems come in the order of the
// route's keys in docs/configuration.md.
func (c *Config) validateRoutes(p *problems) {
	seen := map[string]bool{}
	claimed := map[string]string{} // "host prefix" → route name
	for i := range c.Routes {
		r := &c.Routes[i]
		field := fmt.Sprintf("routes[%d]", i)
		switch {
		case r.Name == "":
			p.addf(field+".name", "is required")
		case !validName(r.Name):
			p.addf(field+".name", "%q: use letters, digits, '-' and '_'", r.Name)
		case seen[r.Name]:
			p.addf(field+".name", "%q is used by another route", r.Name)
		}
		seen[r.Name] = true
		c.validateRouteTarget(p, field, r)
		if r.CORS != "" {
			if _, ok := c.CORS.Policies[r.CORS]; !ok {
				p.addf(field+".cors", "%q is not a policy in cors.policies", r.CORS)
			}
		}
		validateRouteCookies(p, field, r)
		hosts := r.Hosts
		if len(hosts) == 0 {
			hosts = []string{""}
		}
		for _, h := range hosts {
			key := strings.ToLower(h) + " " + strings.TrimRight(r.PathPrefix, "/")
			if other, dup := claimed[key]; dup {
				p.addf(field+".path_prefix", "%q on host %q is already routed by %q (this route would never match)", r.PathPrefix, h, other)
			}
			claimed[key] = r.Name
		}
		c.validateRoutePolicies(p, field, r)
	}
}

// validateRouteTarget checks what a route matches and where it goes:
// path_prefix (default "/"), upstream (parsed into UpstreamURL), hosts
// and timeout (default 30s).
func (c *Config) validateRouteTarget(p *problems, field string, r *Route) {
	if r.PathPrefix == "" {
		r.PathPrefix = "/"
	}
	if !strings.HasPrefix(r.PathPrefix, "/") {
		p.addf(field+".path_prefix", "%q must start with /", r.PathPrefix)
	}
	u, err := url.Parse(r.Upstream)
	switch {
	case r.Upstream == "":
		p.addf(field+".upstream", "is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		p.addf(field+".upstream", "%s is not an absolute http(s) URL", showURL(r.Upstream))
	default:
		r.UpstreamURL = u
	}
	for j, h := range r.Hosts {
		if h == "" || strings.Contains(h[1:], "*") || (strings.HasPrefix(h, "*") && !strings.HasPrefix(h, "*.")) {
			p.addf(fmt.Sprintf("%s.hosts[%d]", field, j), "%q: use an exact host or *.domain", h)
		} else if !routeHostName(strings.TrimPrefix(h, "*.")) {
			// The request's Host is matched without its port; a scheme,
			// port, path or space here made a route that never matched.
			p.addf(fmt.Sprintf("%s.hosts[%d]", field, j),
				"%q: use a bare host name, without scheme, port or path (portal.example.org, *.example.org, an IP address)", h)
		}
	}
	if r.Timeout == 0 {
		r.Timeout = Duration(30e9)
	}
	if r.Timeout < 0 {
		p.addf(field+".timeout", "must be positive")
	}
}

// validateRoutePolicies checks what a route does to what passes: escaped
// slashes, upgrades (default websocket), sandbox and the SameSite of the
// cookies it hands back.
func (c *Config) validateRoutePolicies(p *problems, field string, r *Route) {
	switch r.EscapedSlashes {
	case "":
	case "reject", "keep":
		if c.EscapedSlashes == "unescape" {
			p.addf(field+".escaped_slashes", "%q: the top-level escaped_slashes is unescape, so no escaped slash is left to %s (remove this key or change the top level)", r.EscapedSlashes, r.EscapedSlashes)
		}
	default:
		p.addf(field+".escaped_slashes", "%q: want reject or keep", r.EscapedSlashes)
	}
	if r.Upgrades == nil {
		// The default, filled in so that `config check` prints it: an
		// absent key tunnels websocket, an empty list nothing.
		r.Upgrades = []string{"websocket"}
	}
	for j, u := range r.Upgrades {
		f := fmt.Sprintf("%s.upgrades[%d]", field, j)
		switch {
		case strings.EqualFold(u, "h2c"):
			p.addf(f, `"h2c" is never tunnelled: an h2c connection would carry requests the gateway never routes, limits or rewrites`)
		case !validToken(u):
			p.addf(f, "%q is not a protocol token (such as websocket)", u)
		}
	}
	if msg := checkSandbox(r.Sandbox); msg != "" {
		p.addf(field+".sandbox", "%q: %s", r.Sandbox, msg)
	}
	switch strings.ToLower(r.Cookies.SameSite) {
	case "", "lax", "strict", "none":
	default:
		p.addf(field+".cookies.same_site", "%q: want Lax, Strict or None", r.Cookies.SameSite)
	}
}

// validateRouteCookies checks a route's cookies to forward and their
// domain; an absent forward list becomes DefaultCookieForward, its one
// home.
func validateRouteCookies(p *problems, field string, r *Route) {
	if r.Cookies.Forward == nil {
		r.Cookies.Forward = DefaultCookieForward()
		r.Cookies.defaulted = true
	}
	for j, fw := range r.Cookies.Forward {
		f := fmt.Sprintf("%s.cookies.forward[%d]", field, j)
		if fw.Cookie == "" {
			p.addf(f+".cookie", "is required")
		}
		if fw.As != "" && fw.As != "authorization" {
			p.addf(f+".as", "%q: want \"authorization\" or nothing", fw.As)
		}
	}
	if d := r.Cookies.Domain; d != "" && (strings.ContainsAny(d, " ;,=\t\"") || strings.Contains(d, "/")) {
		p.addf(field+".cookies.domain", "%q is not a cookie domain (a host name such as portal.example.org)", d)
	}
}

// validateAuth checks the token verification: the JWKS URL, its refresh
// interval and the leeway.
func (c *Config) validateAuth(p *problems) {
	if c.Auth.JWKSURL != "" {
		if u, err := url.Parse(c.Auth.JWKSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.addf("auth.jwks_url", "%s is not an absolute http(s) URL", showURL(c.Auth.JWKSURL))
		}
	}
	if c.Auth.JWKSRefresh.D() < time.Second {
		p.addf("auth.jwks_refresh", "%s: want at least 1s", c.Auth.JWKSRefresh.D())
	}
	if c.Auth.Leeway < 0 {
		p.addf("auth.leeway", "must not be negative")
	}
}

// parsePrefix reads a CIDR or a bare IP. Peers are compared as unmapped
// addresses (an IPv4 client on a dual-stack socket is ::ffff:a.b.c.d), so
// an IPv4-mapped CIDR ("::ffff:10.0.0.0/104") is turned into its IPv4 form
// ("10.0.0.0/8"); one shorter than /96 also covers non-IPv4 addresses and
// is refused.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil || !pfx.Addr().Is4In6() {
			return pfx.Masked(), err
		}
		if pfx.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("IPv4-mapped prefix %s is shorter than /96", s)
		}
		return netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96).Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func validName(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return s != ""
}

// validToken reports whether s is an RFC 9110 token (an Upgrade protocol
// name without its "/version").
func validToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// routeHostName reports whether h can equal a request's Host once its
// port and trailing dot are removed: letters, digits, '-', '_' and '.',
// or an IP address (IPv6 with or without brackets).
func routeHostName(h string) bool {
	if h == "" {
		return false
	}
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return true
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// sandboxTokens are the CSP sandbox tokens a route's sandbox may list
// (HTML, "the iframe element", sandbox attribute), allow-same-origin
// excepted.
var sandboxTokens = map[string]bool{
	"allow-downloads": true, "allow-forms": true, "allow-modals": true, "allow-orientation-lock": true,
	"allow-pointer-lock": true, "allow-popups": true, "allow-popups-to-escape-sandbox": true,
	"allow-presentation": true, "allow-scripts": true, "allow-top-navigation": true,
	"allow-top-navigation-by-user-activation": true, "allow-top-navigation-to-custom-protocols": true,
	"allow-storage-access-by-user-activation": true,
}

// checkSandbox returns why a route's sandbox value is refused, or "".
func checkSandbox(v string) string {
	switch v {
	case "", "off", "on":
		return ""
	}
	for _, tok := range strings.Fields(v) {
		switch {
		case tok == "allow-same-origin":
			return "allow-same-origin is refused: it gives the route's pages the portal's origin (its cookies, storage and API) back"
		case !sandboxTokens[tok]:
			return fmt.Sprintf("%q is not a sandbox token (want off, on, or tokens such as allow-scripts allow-forms allow-popups)", tok)
		}
	}
	return ""
}
