// Package gateway is Borda's HTTP front (docs/edge.md): the route table,
// one httputil.ReverseProxy per route on a shared tuned transport, client
// IP resolution, the middleware chain (request id and access log, metrics,
// CORS, identity, rate limits, telemetry), health and readiness, the admin
// handler and the draining switch used by graceful shutdown.
//
// Construct it with New from Options (cmd/borda maps the configuration
// file into them) and Deps (the collaborators, through the small
// interfaces declared here), serve Handler on the public listener and
// AdminHandler on the admin listener (Server.HTTPServer gives both sane
// timeouts), and on SIGTERM call Shutdown (docs/architecture.md).
package gateway

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/identity"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/telemetry"
)

// Limiter decides the rate-limit Verdict of one request. It must answer
// within its own deadline and fail open (docs/rate-limiting.md, "Failure behaviour"); the gateway only
// acts on the Verdict.
type Limiter interface {
	Decide(ctx context.Context, s ratelimit.Subject) ratelimit.Verdict
}

// IdentityVerifier verifies the one credential of a request, the token
// cookies.Resolve chose and the upstream receives (docs/edge.md,
// "Identity"): false with the anonymous Identity when it does not verify.
// It must not block on the network. *identity.Verifier implements it.
type IdentityVerifier interface {
	Verify(token string) (identity.Identity, bool)
}

// Recorder receives one Event per finished request; Record must never
// block.
type Recorder interface {
	Record(telemetry.Event)
}

// Webhook is the webhook ingress, served for its Paths (and their
// sub-paths) on any Host, before host routing, CORS and rate limits.
type Webhook interface {
	http.Handler
	// Paths are the ingress paths ("/webhooks/whatsapp").
	Paths() []string
	// RedactPath returns a request path fit for logs and telemetry keys:
	// a credential carried in the path ({path}/t/{token}) replaced.
	RedactPath(path string) string
}

// Deps are the collaborators New wires in. Every field is optional.
type Deps struct {
	// Limiter decides rate limits; nil: no rate limiting.
	Limiter Limiter
	// Verifier reads the verified identity of a request; nil: every
	// request is anonymous (oversized and malformed Bearer credentials
	// are still refused).
	Verifier IdentityVerifier
	// Recorder gets telemetry events; nil: none recorded.
	Recorder Recorder
	// Webhook is the ingress; nil: webhook paths are routed like any path.
	Webhook Webhook
	// Checks are the readiness checks by component ("proxy", "webhook"),
	// each bounded by a 2 s context. A "proxy" check that always passes is
	// added when none is given.
	Checks map[string]func(context.Context) error
	// Registry receives the gateway's metrics and is what /metrics serves;
	// nil: a private registry.
	Registry *prometheus.Registry
	// Logger is the process logger; nil discards.
	Logger *slog.Logger
	// Transport reaches the upstreams; nil: a transport tuned for a
	// reverse proxy (proxy.go, newTransport).
	Transport http.RoundTripper
}

// Server is the gateway. Its handlers are safe for concurrent use.
type Server struct {
	log          *slog.Logger
	errorLog     *log.Logger
	ip           clientIP
	router       *router
	routes       []*route
	webhook      Webhook
	webhookPaths []string
	limiter      Limiter
	recorder     Recorder
	verifier     IdentityVerifier
	// verifies is cookies.Resolve's verify callback (nil without a
	// verifier), built once.
	verifies func(token string) bool
	metrics  *metrics
	deny     denyState
	// unroutedMetrics and webhookMetrics are the request metrics of the
	// "unrouted" and "webhook" labels; a route's are in route.metrics.
	unroutedMetrics *labelMetrics
	webhookMetrics  *labelMetrics
	checks          map[string]func(context.Context) error
	checkNames      []string
	draining        atomic.Bool
	transport       http.RoundTripper
	registry        *prometheus.Registry
	// keepUnderscores is headers_with_underscores: allow (else such
	// request headers are dropped before the upstream).
	keepUnderscores bool
	// escapedSlashes is the top-level escaped_slashes policy; a route's
	// own (reject or keep) is in route.escapedSlashes.
	escapedSlashes slashAction
	// pprof gates /debug/pprof/ on the admin listener (admin_pprof).
	pprof pprofGate
	// bodyTimeout and bodyMinRate are server.body_timeout and
	// server.body_min_rate (bytes/s) for bodies on proxied routes.
	bodyTimeout time.Duration
	// sendTimeout is server.send_timeout (routeProxy.ServeHTTP arms it).
	sendTimeout time.Duration
	bodyMinRate int64
	// maxConns is server.max_connections, maxConnsPerIP
	// server.max_connections_per_ip (Listener).
	maxConnsPerIP int
	maxConns      int
	// via is this process's Via pseudonym ("borda-" and 64 random bits in
	// hex), added to every proxied request so a request that comes back
	// to the process that sent it is answered 508 (loop.go).
	via string
	// viaEntry11 is "1.1 " + via, the Via entry of an HTTP/1.1 request;
	// viaLine11 is the Via header of an HTTP/1.1 request that came with
	// none ([]string{viaEntry11}, cap 1), shared by every such request.
	viaEntry11 string
	viaLine11  []string

	public http.Handler
	admin  http.Handler

	// inFlight counts requests inside the chain (upgraded connections
	// included); base is the parent of every request context of servers
	// built by HTTPServer, cancelled by Shutdown as a last resort.
	inFlight   atomic.Int64
	base       context.Context
	cancelBase context.CancelFunc
}

// New builds the gateway from its options and collaborators. It fails on
// a route without an absolute upstream URL, or when the metrics cannot be
// registered (for instance twice on one registry). New starts nothing: the
// gateway has no background work of its own (its collaborators' is run
// by the caller).
func New(opts Options, deps Deps) (*Server, error) {
	s := &Server{
		log:      deps.Logger,
		webhook:  deps.Webhook,
		limiter:  deps.Limiter,
		recorder: deps.Recorder,
		verifier: deps.Verifier,
		registry: deps.Registry,
		via:      newViaPseudonym(),
	}
	s.SetDeny(opts.Deny)
	if s.verifier != nil {
		s.verifies = func(token string) bool { _, ok := s.verifier.Verify(token); return ok }
	}
	s.viaEntry11 = "1.1 " + s.via
	s.viaLine11 = []string{s.viaEntry11}[:1:1]
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "gateway")
	s.errorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	m, err := newMetrics(s.registry)
	if err != nil {
		return nil, fmt.Errorf("registering gateway metrics: %w", err)
	}
	s.metrics = m
	s.unroutedMetrics, s.webhookMetrics = m.forLabel(labelUnrouted), m.forLabel(labelWebhook)
	s.ip = clientIP{trusted: opts.TrustedProxies, v6Bits: opts.IPv6PrefixLen}
	if opts.ClientIPHeader != "" {
		s.ip.header = http.CanonicalHeaderKey(opts.ClientIPHeader)
	}
	s.keepUnderscores = opts.KeepUnderscoreHeaders
	s.escapedSlashes = opts.EscapedSlashes.action()
	s.pprof = newPprofGate(opts.Pprof)
	s.bodyTimeout, s.bodyMinRate, s.maxConns = opts.BodyTimeout, opts.BodyMinRate, opts.MaxConnections
	s.maxConnsPerIP = opts.MaxConnectionsPerIP
	s.sendTimeout = opts.SendTimeout
	if s.webhook != nil {
		for _, p := range s.webhook.Paths() {
			if p != "" {
				s.webhookPaths = append(s.webhookPaths, normalizePrefix(p))
			}
		}
	}
	s.transport = deps.Transport
	if s.transport == nil {
		s.transport = newTransport()
	}
	if err := s.buildRoutes(opts.Routes); err != nil {
		return nil, err
	}
	s.checks = map[string]func(context.Context) error{}
	for name, fn := range deps.Checks {
		if fn != nil {
			s.checks[name] = fn
		}
	}
	if _, ok := s.checks["proxy"]; !ok {
		s.checks["proxy"] = func(context.Context) error { return nil }
	}
	for name := range s.checks {
		s.checkNames = append(s.checkNames, name)
	}
	sort.Strings(s.checkNames)

	var chain http.Handler = http.HandlerFunc(s.dispatch)
	chain = s.recoverer(chain)
	chain = s.observe(chain)
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.public = s.publicMux(chain)
	s.admin = s.adminMux()
	return s, nil
}

func (s *Server) buildRoutes(routes []Route) error {
	pool := &bufferPool{}
	for i, rc := range routes {
		u := rc.Upstream.URL
		if u == nil || u.Host == "" {
			return fmt.Errorf("building route %q: upstream is not an absolute URL", rc.Name)
		}
		rt := &route{
			Name:          rc.Name,
			Hosts:         rc.Hosts,
			Prefix:        normalizePrefix(rc.PathPrefix),
			Upstream:      u,
			stripPrefix:   rc.StripPrefix,
			preserveHost:  rc.PreserveHost,
			timeout:       rc.Upstream.Timeout,
			exposeHeaders: rc.ExposeHeaders,
			forward:       rc.Cookies.Forward,
		}
		rt.session = cookies.ForwardsSession(rt.forward)
		rt.cookiePath = cookiePathFor(rt.Prefix)
		rt.csp = sandboxHeader(rc.Sandbox, rt.session)
		rt.upgradeOrigins = upgradeOriginSet(rc.CORS)
		rt.setCookie = cookies.ResponsePolicy{Domain: rc.Cookies.Domain, SameSite: rc.Cookies.SameSite, Forward: rt.forward}
		if rt.Name == "" {
			rt.Name = fmt.Sprintf("route%d", i)
		}
		rt.metrics = s.metrics.forLabel(rt.Name)
		rt.escapedSlashes = s.escapedSlashes
		if rc.EscapedSlashes != SlashesDefault && s.escapedSlashes != slashUnescape {
			rt.escapedSlashes = rc.EscapedSlashes.action()
		}
		rt.upgrades = make([]string, 0, len(rc.Upgrades))
		for _, u := range rc.Upgrades {
			if !strings.EqualFold(u, "h2c") { // never tunnelled (docs/edge.md, "Routes")
				rt.upgrades = append(rt.upgrades, u)
			}
		}
		rp := s.newRouteProxy(rt, s.transport, pool)
		rp.rp.FlushInterval = rc.Upstream.FlushInterval
		var h http.Handler = rp
		if s.limiter != nil {
			h = s.limit(h)
		}
		h = s.identify(h) // also without a verifier: it refuses oversized Bearer tokens
		if rc.CORS != nil {
			h = newCORS(*rc.CORS).Handler(h)
			rt.varyOrigin = true
		}
		rt.handler = h
		s.routes = append(s.routes, rt)
	}
	s.router = newRouter(s.routes)
	return nil
}

// Handler is the public listener's handler: /healthz, /readyz and
// /readyz/{component}, then the chain (webhook ingress, routes, 404). It
// never serves /metrics.
func (s *Server) Handler() http.Handler { return s.public }

// AdminHandler is the admin listener's handler: /metrics (the injected
// registry), /healthz, /readyz, /readyz/{component} and /debug/pprof/.
// Bind it to loopback or a private network only.
func (s *Server) AdminHandler() http.Handler { return s.admin }

// setDraining turns every readiness answer into 503 and asks clients to
// close keep-alive connections (Connection: close), so load balancers
// take the instance out before the listener stops. It cannot be undone;
// Shutdown calls it first.
func (s *Server) setDraining() { s.draining.Store(true) }

// Close releases what the gateway holds beyond in-flight requests: the
// request contexts' parent and idle upstream connections. Call it after
// http.Server.Shutdown returned. The collaborators in Deps (the identity
// verifier's JWKS refresh among them) are the caller's to stop.
func (s *Server) Close() error {
	s.cancelBase()
	if t, ok := s.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	return nil
}

func (s *Server) publicMux(chain http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if r.Body != http.NoBody && (p == "/healthz" || strings.HasPrefix(p, "/readyz")) {
			// Probes read no body: never wait for one (body.go).
			w.Header()["Connection"] = []string{"close"}
			defer func() { _ = http.NewResponseController(w).SetReadDeadline(time.Now()) }()
		}
		switch {
		case p == "/healthz":
			s.healthz(w, r)
		case p == "/readyz":
			s.readyz(w, r, "", false)
		case strings.HasPrefix(p, "/readyz/") && len(p) > len("/readyz/") && !strings.Contains(p[len("/readyz/"):], "/"):
			s.readyz(w, r, p[len("/readyz/"):], false)
		default:
			chain.ServeHTTP(w, r)
		}
	})
}
