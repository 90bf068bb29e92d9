// Package gateway is Borda's HTTP front (design.md §3): the route table,
// one httputil.ReverseProxy per route on a shared tuned transport, client
// IP resolution, the middleware chain (request id and access log, metrics,
// CORS, identity, rate limits, telemetry), health and readiness, the admin
// handler and the draining switch used by graceful shutdown.
//
// Construct it with New, serve Handler on the public listener and
// AdminHandler on the admin listener (Server.NewHTTPServer gives both
// sane timeouts), and on SIGTERM call Shutdown.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/identity"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/telemetry"
)

// Limiter decides the rate-limit Verdict of one request. It must answer
// within its own deadline and fail open (design.md §4); the gateway only
// acts on the Verdict.
type Limiter interface {
	Decide(ctx context.Context, s ratelimit.Subject) ratelimit.Verdict
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
	// Transport reaches the upstreams; nil: NewTransport().
	Transport http.RoundTripper
}

// Server is the gateway. Its handlers are safe for concurrent use.
type Server struct {
	log          *slog.Logger
	errorLog     *log.Logger
	ip           clientIP
	router       *router
	routes       []*Route
	webhook      Webhook
	webhookPaths []string
	limiter      Limiter
	recorder     Recorder
	verifier     *identity.Verifier
	metrics      *metrics
	checks       map[string]func(context.Context) error
	checkNames   []string
	draining     atomic.Bool
	transport    http.RoundTripper
	registry     *prometheus.Registry
	// keepUnderscores is headers_with_underscores: allow (else such
	// request headers are dropped before the upstream).
	keepUnderscores bool
	// escapedSlashes is the top-level escaped_slashes policy; a route's
	// own (reject or keep) is in Route.escapedSlashes.
	escapedSlashes slashAction
	// pprof gates /debug/pprof/ on the admin listener (admin_pprof).
	pprof pprofGate
	// bodyTimeout and bodyMinRate are server.body_timeout and
	// server.body_min_rate (bytes/s) for bodies on proxied routes.
	bodyTimeout time.Duration
	bodyMinRate int64
	// maxConns is server.max_connections (Listener).
	maxConns int
	// via is this process's Via pseudonym ("borda-" and 64 random bits in
	// hex), added to every proxied request so a request that comes back
	// to the process that sent it is answered 508 (loop.go).
	via string
	// viaEntry11 is "1.1 " + via, the Via entry of an HTTP/1.1 request.
	viaEntry11 string

	public http.Handler
	admin  http.Handler

	// inFlight counts requests inside the chain (upgraded connections
	// included); base is the parent of every request context of servers
	// built by NewHTTPServer, cancelled by Shutdown as a last resort.
	inFlight   atomic.Int64
	base       context.Context
	cancelBase context.CancelFunc
}

// New builds the gateway from a validated configuration (configs.Load or
// Config.Validate fill the parsed fields; New parses what is missing).
// It fails on an unusable route or policy, or when the metrics cannot be
// registered (for instance twice on one registry).
func New(cfg configs.Config, deps Deps) (*Server, error) {
	s := &Server{
		log:      deps.Logger,
		webhook:  deps.Webhook,
		limiter:  deps.Limiter,
		recorder: deps.Recorder,
		registry: deps.Registry,
		via:      newViaPseudonym(),
	}
	s.viaEntry11 = "1.1 " + s.via
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
	s.ip = clientIP{trusted: cfg.TrustedPrefixes, v6Bits: cfg.IPv6PrefixLen}
	if len(s.ip.trusted) == 0 && len(cfg.TrustedProxies) > 0 {
		return nil, errors.New("building gateway: trusted_proxies not parsed (call Config.Validate first)")
	}
	if cfg.ClientIPHeader != "" {
		s.ip.header = http.CanonicalHeaderKey(cfg.ClientIPHeader)
	}
	if s.ip.v6Bits == 0 {
		s.ip.v6Bits = 64
	}
	s.keepUnderscores = cfg.HeadersWithUnderscores == "allow"
	s.escapedSlashes = parseSlashAction(cfg.EscapedSlashes)
	s.pprof = newPprofGate(cfg)
	s.bodyTimeout, s.bodyMinRate, s.maxConns = cfg.Server.BodyTimeout.D(), cfg.Server.BodyMinRate, cfg.Server.MaxConnections
	if s.bodyTimeout <= 0 { // a Config not from Load or Default
		s.bodyTimeout, s.bodyMinRate = 60*time.Second, 500
	}
	if s.webhook != nil {
		for _, p := range s.webhook.Paths() {
			if p != "" {
				s.webhookPaths = append(s.webhookPaths, normalizePrefix(p))
			}
		}
	}
	s.verifier, err = startVerifier(cfg.Auth, s.log)
	if err != nil {
		return nil, fmt.Errorf("building identity verifier: %w", err)
	}
	s.transport = deps.Transport
	if s.transport == nil {
		s.transport = NewTransport()
	}
	if err := s.buildRoutes(cfg); err != nil {
		_ = s.verifier.Stop(context.Background())
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

func (s *Server) buildRoutes(cfg configs.Config) error {
	pool := &bufferPool{}
	for i, rc := range cfg.Routes {
		u := rc.UpstreamURL
		if u == nil {
			var err error
			if u, err = url.Parse(rc.Upstream); err != nil || u.Host == "" {
				return fmt.Errorf("building route %q: upstream %q is not an absolute URL", rc.Name, rc.Upstream)
			}
		}
		timeout := rc.Timeout.D()
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		rt := &Route{
			Name:          rc.Name,
			Hosts:         rc.Hosts,
			Prefix:        normalizePrefix(rc.PathPrefix),
			Upstream:      u,
			stripPrefix:   rc.StripPrefix,
			preserveHost:  rc.PreserveHost,
			timeout:       timeout,
			exposeHeaders: rc.ExposeHeaders,
			forward:       cookieForward(rc.Cookies.Forward),
		}
		rt.setCookie = cookies.ResponsePolicy{Domain: rc.Cookies.Domain, SameSite: rc.Cookies.SameSite, Forward: rt.forward}
		if rt.Name == "" {
			rt.Name = fmt.Sprintf("route%d", i)
		}
		rt.escapedSlashes = s.escapedSlashes
		if rc.EscapedSlashes != "" && s.escapedSlashes != slashUnescape {
			rt.escapedSlashes = parseSlashAction(rc.EscapedSlashes)
		}
		rt.upgrades = []string{"websocket"}
		if rc.Upgrades != nil {
			rt.upgrades = make([]string, 0, len(rc.Upgrades))
			for _, u := range rc.Upgrades {
				if !strings.EqualFold(u, "h2c") { // configs refuses it; never tunnelled
					rt.upgrades = append(rt.upgrades, u)
				}
			}
		}
		rp := s.newRouteProxy(rt, s.transport, pool)
		rp.rp.FlushInterval = rc.FlushInterval.D()
		var h http.Handler = rp
		if s.limiter != nil {
			h = s.limit(h)
		}
		h = s.identify(h) // also without a verifier: it refuses oversized Bearer tokens
		if rc.CORS != "" {
			pol, ok := cfg.CORS.Policies[rc.CORS]
			if !ok {
				return fmt.Errorf("building route %q: cors policy %q does not exist", rc.Name, rc.CORS)
			}
			h = newCORS(pol).Handler(h)
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

// Routes returns the compiled route table in configuration order.
func (s *Server) Routes() []*Route { return s.routes }

// SetDraining turns every readiness answer into 503 and asks clients to
// close keep-alive connections (Connection: close), so load balancers
// take the instance out before the listener stops. It cannot be undone.
func (s *Server) SetDraining() { s.draining.Store(true) }

// Draining reports whether SetDraining was called.
func (s *Server) Draining() bool { return s.draining.Load() }

// Close releases what the gateway holds beyond in-flight requests: idle
// upstream connections and the JWKS refresh goroutine. Call it after
// http.Server.Shutdown returned.
func (s *Server) Close() error {
	s.cancelBase()
	_ = s.verifier.Stop(context.Background())
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
