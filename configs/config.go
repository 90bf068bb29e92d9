// Package configs loads, validates and redacts Borda's configuration: one
// YAML file per environment (configs/local.yaml, staging.yaml,
// production.yaml) plus the environment-variable overrides (docs/configuration.md).
//
// Every section is optional. Load parses durations, CIDRs and URLs once, so a
// component never parses configuration on a request, and refuses unknown
// keys. Validate returns one error per problem, each naming its field.
package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/olp-edu/borda/internal/redact"
)

// Environments accepted in `environment`, with their Redis key prefixes.
const (
	EnvProduction  = "production"
	EnvStaging     = "staging"
	EnvDevelopment = "development"
)

// DefaultPath is the config file used when neither --config nor
// BORDA_CONFIG names one.
const DefaultPath = "configs/local.yaml"

// Config is the whole configuration of every borda command. Field comments
// give units and defaults; zero values are replaced by Default's.
type Config struct {
	// Environment is production, staging or development (default
	// development). It fixes the Redis key prefix (olp:, olp-stg:, olp-dev:).
	Environment string `yaml:"environment"`
	// Listen is the public listener address (default ":8080").
	Listen string `yaml:"listen"`
	// AdminListen serves /metrics, /healthz, /readyz and /debug/pprof/
	// (default "127.0.0.1:9091"). Empty string keeps the default; "off"
	// disables the admin listener.
	AdminListen string `yaml:"admin_listen"`
	// AdminPprof says who may reach /debug/pprof/ on the admin listener:
	// loopback (default: peers on 127.0.0.0/8 and ::1 only, so a listener
	// bound to 0.0.0.0 for metrics and probes keeps profiles off the
	// network, and only with a Host that is an IP address or localhost, so
	// a DNS-rebinding page in a local browser cannot read them; others get
	// 404), token (any peer sending "Authorization:
	// Bearer" with ADMIN_PPROF_TOKEN, compared in constant time; others
	// get 401) or off. Behind a sidecar proxy in the same pod every peer
	// is loopback: use token or off there.
	AdminPprof string `yaml:"admin_pprof"`
	// TrustedProxies lists the CIDRs (or bare IPs) of peers whose client-IP
	// headers are believed. Empty: no peer is trusted. IPv4-mapped forms
	// (::ffff:10.0.0.0/104) are read as IPv4 (10.0.0.0/8).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ClientIPHeader is the header a trusted peer sets with the client IP
	// (X-Real-IP, CF-Connecting-IP). Empty: the rightmost untrusted
	// X-Forwarded-For entry.
	ClientIPHeader string `yaml:"client_ip_header"`
	// IPv6PrefixLen is the prefix length IPv6 clients are grouped by for
	// rate limits (default 64; 128 keys each address on its own).
	IPv6PrefixLen int `yaml:"ipv6_prefix_len"`
	// HeadersWithUnderscores is what happens to a request header whose
	// name contains "_" on its way to an upstream: drop (default, as
	// nginx's underscores_in_headers off) or allow. CGI-style upstreams
	// (PHP-FPM, Rack, WSGI) read X_Forwarded_For and X-Forwarded-For as
	// one variable, so an allowed X_Forwarded_For or X_Real_IP would stand
	// in for the client IP the gateway sets (Envoy:
	// headers_with_underscores_action).
	HeadersWithUnderscores string `yaml:"headers_with_underscores"`
	// EscapedSlashes is what happens to a request whose path holds an
	// escaped slash or backslash (%2F, %5C, any case) or a raw backslash,
	// which upstreams that decode before resolving dot segments (nginx,
	// Tomcat, IIS) read as a separator, so "/api/..%2fadmin" is their
	// /admin: reject (default: 400 before routing, as Traefik's
	// encodedCharacters), unescape (they become "/", then dot segments
	// are resolved and the result is routed and forwarded, as Envoy's
	// UNESCAPE_AND_FORWARD) or keep (forwarded as sent; a path that would
	// hold a dot segment once split at them is still refused). A route's
	// own escaped_slashes overrides reject and keep. docs/edge.md, "Paths".
	EscapedSlashes string `yaml:"escaped_slashes"`

	Redis      Redis      `yaml:"redis"`
	AMQP       AMQP       `yaml:"amqp"`
	Database   Database   `yaml:"database"`
	Auth       Auth       `yaml:"auth"`
	CORS       CORS       `yaml:"cors"`
	Routes     []Route    `yaml:"routes"`
	RateLimits RateLimits `yaml:"rate_limits"`
	Telemetry  Telemetry  `yaml:"telemetry"`
	Webhook    Webhook    `yaml:"webhook"`
	Forward    Forward    `yaml:"forward"`
	Server     Server     `yaml:"server"`
	Shutdown   Shutdown   `yaml:"shutdown"`
	// Deny lists refuse client addresses and user agents on every request
	// (docs/edge.md, "Deny lists").
	Deny Deny `yaml:"deny"`
	// CleartextHosts are the hosts (names or IP addresses, exact, any
	// case) that environment production may reach without encryption:
	// redis:// and amqp:// URLs, PostgreSQL without sslmode require,
	// verify-ca or verify-full, and http:// in redis.rest_url, forward.url
	// and auth.jwks_url. Loopback hosts (localhost, 127.0.0.0/8, ::1) always
	// may; for any other an http:// redis.rest_url is refused at start and
	// the rest are warned of (docs/configuration.md, "Production
	// guardrails"). List only hosts reached over a network you trust to
	// carry credentials (an in-cluster service behind a mesh with mTLS, a
	// sidecar). Empty by default.
	CleartextHosts []string `yaml:"cleartext_hosts"`

	// TrustedPrefixes is TrustedProxies parsed by Load.
	TrustedPrefixes []netip.Prefix `yaml:"-"`
	// AdminPprofToken is read from ADMIN_PPROF_TOKEN (admin_pprof: token).
	AdminPprofToken Secret `yaml:"-"`
	// AdminToken is read from ADMIN_TOKEN: the operator token the
	// operator page's replay and relax forms need (docs/operations.md);
	// empty: the page is read-only.
	AdminToken Secret `yaml:"-"`
	// Warnings are the production guardrails allowed by
	// BORDA_ALLOW_WEAK_PRODUCTION=1; `borda config check` and every
	// command print them at start.
	Warnings []string `yaml:"-"`
}

// Redis configures the store behind rate limits, telemetry, relax and the
// forwarder's idempotency keys.
type Redis struct {
	// URL is redis:// or rediss:// (REDIS_URL overrides). Empty and no
	// Upstash REST credentials: the embedded in-memory store (one instance).
	URL Secret `yaml:"url"`
	// KeyPrefix overrides the environment's prefix; it must start with it
	// (olp-stg:t42: is accepted in staging, olp: is not).
	KeyPrefix string `yaml:"key_prefix"`
	// RestURL and RestToken reach Upstash over its REST API
	// (UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN). Used only when
	// URL is empty; then everything that uses Redis runs over REST (rate
	// limits, telemetry, aggregation, the forwarder, the operator page).
	RestURL   string `yaml:"rest_url"`
	RestToken Secret `yaml:"rest_token"`
	// DialTimeout bounds a new connection (default 200ms).
	DialTimeout Duration `yaml:"dial_timeout"`
	// ReadTimeout and WriteTimeout bound one command on the wire
	// (default 100ms each). The request path adds its own, shorter,
	// deadline (rate_limits.timeout). On the Upstash REST store
	// ReadTimeout bounds each HTTPS request of the shared client (a
	// telemetry flush, a forwarder script, a SCAN page), a new TLS
	// connection included: raise it when Upstash is far.
	ReadTimeout  Duration `yaml:"read_timeout"`
	WriteTimeout Duration `yaml:"write_timeout"`
	// PoolSize is the connection pool size per node (default 10 × GOMAXPROCS).
	// Every connection is dialled and kept open in the background, so a
	// burst never dials on the request path: a store that caps
	// connections needs this many per replica.
	PoolSize int `yaml:"pool_size"`
	// Cluster treats URL as a Redis Cluster seed (redis[s]://host:port?addr=host2:port2).
	Cluster bool `yaml:"cluster"`
}

// AMQP configures the RabbitMQ connection (AMQP_URL overrides). URL may
// list the nodes of a cluster, comma-separated
// ("amqp://u:p@node1:5672/,amqp://u:p@node2:5672/"): every connection
// tries them in turn from a random start, as RabbitMQ's client guides
// recommend without a load balancer. A comma separates two URLs only
// before a scheme ("amqp://"), so a comma in a password or vhost stays
// part of its URL.
type AMQP struct {
	URL Secret `yaml:"url"`
	// ManagementURL is the RabbitMQ management HTTP API
	// (http[s]://user:pass@host:15672/; AMQP_MANAGEMENT_URL overrides),
	// optional. Its userinfo is the API's credentials; without one, those
	// of the (first) amqp.url. When set, `borda serve` reads the forward
	// queue's, the events queue's and the DLQ's effective length limit
	// and overflow from it every 10 s (GET /api/queues/{vhost}/{name},
	// the vhost of amqp.url): a broker policy's "overflow" overrides the
	// queues' x-overflow: reject-publish on quorum queues, and while one
	// would drop at its limit the ingress answers 503 QUEUE_MAY_DROP near
	// it (docs/reliability.md, "Length limits refuse, never drop"). The
	// user needs the management API's "monitoring" tag (or
	// "management" with access to the vhost). Empty: not read (`borda
	// config check` warns in production).
	ManagementURL Secret `yaml:"management_url"`
}

// Database configures PostgreSQL (DATABASE_URL overrides). Empty: metric
// aggregation is off and the commands that need it refuse to start.
type Database struct {
	URL Secret `yaml:"url"`
}

// Server configures the public listener's client connections
// (docs/edge.md, "Client connections and request bodies").
type Server struct {
	// BodyTimeout bounds the wait for a request body on a proxied route:
	// a client that sends nothing for this long (nginx's
	// client_body_timeout, whose default this is: 60s) is answered 408 and
	// its connection closed. Only time spent waiting on the client counts,
	// not time the upstream takes to read. The webhook ingress has its own
	// webhook.body_timeout.
	BodyTimeout Duration `yaml:"body_timeout"`
	// BodyMinRate is the lowest average rate, in bytes per second, a
	// request body on a proxied route may arrive at once body_timeout has
	// passed (default 500, Apache mod_reqtimeout's MinRate): a body
	// trickled a byte at a time is answered 408 at about body_timeout.
	// 0 turns the rate check off (body_timeout still applies).
	BodyMinRate int64 `yaml:"body_min_rate"`
	// SendTimeout bounds each write of a response to a client on a proxied
	// route (nginx's send_timeout, whose default this is: 60s): a client
	// that reads nothing for this long has its connection closed, and
	// the upstream connection serving it is released. It is a timeout
	// between two successive writes, not on the whole response: a
	// download or a stream of any length goes on while the client reads.
	SendTimeout Duration `yaml:"send_timeout"`
	// MaxConnections caps the client connections the public listener
	// holds open at once, idle keep-alive ones included (default 4096).
	// At the cap a new connection closes the longest-idle keep-alive
	// connection, or waits in the kernel's accept queue until one closes
	// when none is idle. A connection waiting on a request body costs
	// about 60 KB (docs/performance.md, "Slow clients").
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIP caps the public listener's open connections
	// from one client IP, the TCP peer (default 1024; 0 turns it off;
	// trusted_proxies peers are exempt). Above it the client's own
	// longest-idle connection is closed, or, when none is idle, the new
	// connection is answered 503 and closed (nginx limit_conn;
	// borda_http_connections_refused_total).
	MaxConnectionsPerIP int `yaml:"max_connections_per_ip"`
	// AdminMaxConnections caps the admin listener's open connections
	// (default 64; one IP holds at most a quarter), apart from
	// max_connections, so the admin port cannot take the public
	// listener's file descriptors. Its requests have a 10 s header and a
	// 30 s whole-request read timeout.
	AdminMaxConnections int `yaml:"admin_max_connections"`
}

// Shutdown configures graceful shutdown. From SIGTERM to exit `borda
// serve` takes at most readiness_grace + drain + confirm_drain (plus up to
// 5 s more only when stderr is stalled); docs/edge.md, "Shutdown", gives
// the arithmetic for terminationGracePeriodSeconds.
type Shutdown struct {
	// Drain bounds how long in-flight HTTP requests may finish after
	// SIGTERM (default 5s); request bodies still arriving then are cut
	// off.
	Drain Duration `yaml:"drain"`
	// ReadinessGrace is how long /readyz answers 503 before the listener
	// stops accepting, so load balancers take the instance out first
	// (default 0: stop at once).
	ReadinessGrace Duration `yaml:"readiness_grace"`
	// ConfirmDrain bounds what follows the HTTP drain: waiting for the
	// broker's outstanding publish confirms and flushing the last
	// telemetry batch (default 5s).
	ConfirmDrain Duration `yaml:"confirm_drain"`
}

// Default returns the configuration every loaded file starts from.
func Default() Config {
	return Config{
		Environment:            EnvDevelopment,
		Listen:                 ":8080",
		AdminListen:            "127.0.0.1:9091",
		AdminPprof:             PprofLoopback,
		IPv6PrefixLen:          64,
		HeadersWithUnderscores: "drop",
		EscapedSlashes:         "reject",
		Redis: Redis{
			DialTimeout:  Duration(200e6),
			ReadTimeout:  Duration(100e6),
			WriteTimeout: Duration(100e6),
		},
		AMQP:       AMQP{URL: "amqp://guest:guest@127.0.0.1:5672/"},
		Auth:       defaultAuth(),
		RateLimits: defaultRateLimits(),
		Telemetry:  defaultTelemetry(),
		Webhook:    defaultWebhook(),
		Forward:    defaultForward(),
		Server:     Server{BodyTimeout: Duration(60e9), BodyMinRate: 500, SendTimeout: Duration(60e9), MaxConnections: 4096, MaxConnectionsPerIP: 1024, AdminMaxConnections: 64},
		Shutdown:   Shutdown{Drain: Duration(5e9), ConfirmDrain: Duration(5e9)},
		Deny:       Deny{MaxCoveragePercent: 10},
	}
}

// Load reads the YAML file at path over Default, applies the environment
// overrides (see ApplyEnv) and parses derived fields. It returns a
// *ValidationError listing every problem when the file is syntactically
// valid but wrong, or another error when the file cannot be read (or is
// larger than MaxFileBytes) or parsed (unknown keys are a parse error
// naming the key and line).
func Load(path string) (Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading config: %w", err)
	}
	return Parse(data, os.LookupEnv)
}

// unknownKey rewrites yaml.v3's "field x not found in type configs.Route"
// into words an operator knows.
var unknownKey = regexp.MustCompile(`field (\S+) not found in type \S+`)

// Parse is Load without the file system: data is the YAML document and
// lookup reads environment variables (os.LookupEnv in production, a map in
// tests).
func Parse(data []byte, lookup func(string) (string, bool)) (Config, error) {
	cfg := Default()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("parsing config: %s", unknownKey.ReplaceAllString(syntaxLineFixed(data, err), `unknown key "$1"`))
	}
	if err := ApplyEnv(&cfg, lookup); err != nil {
		return Config{}, err
	}
	if err := cfg.validate(lookup); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// ApplyEnv overrides cfg with the environment variables (docs/configuration.md):
// ENVIRONMENT, REDIS_URL, UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN,
// AMQP_URL, AMQP_MANAGEMENT_URL, DATABASE_URL, WEBHOOK_TOKENS (comma-separated),
// LEGACY_WEBHOOK_URL, LEGACY_WEBHOOK_HMAC_SECRET, AUTH_JWKS_URL,
// ADMIN_PPROF_TOKEN, ADMIN_TOKEN, BORDA_LISTEN, BORDA_ADMIN_LISTEN and the
// variable named by auth.jwt_secret_env (AUTH_JWT_SECRET). An empty
// variable counts as unset.
func ApplyEnv(cfg *Config, lookup func(string) (string, bool)) error {
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	if v, ok := get("ENVIRONMENT"); ok {
		cfg.Environment = v
	}
	if v, ok := get("BORDA_LISTEN"); ok {
		cfg.Listen = v
	}
	if v, ok := get("BORDA_ADMIN_LISTEN"); ok {
		cfg.AdminListen = v
	}
	if v, ok := get("REDIS_URL"); ok {
		cfg.Redis.URL = Secret(v)
	}
	if v, ok := get("UPSTASH_REDIS_REST_URL"); ok {
		cfg.Redis.RestURL = v
	}
	if v, ok := get("UPSTASH_REDIS_REST_TOKEN"); ok {
		cfg.Redis.RestToken = Secret(v)
	}
	if v, ok := get("AMQP_URL"); ok {
		cfg.AMQP.URL = Secret(v)
	}
	if v, ok := get("AMQP_MANAGEMENT_URL"); ok {
		cfg.AMQP.ManagementURL = Secret(v)
	}
	if v, ok := get("DATABASE_URL"); ok {
		cfg.Database.URL = Secret(v)
	}
	if v, ok := get("WEBHOOK_TOKENS"); ok {
		cfg.Webhook.Tokens = splitSecrets(v)
	}
	if v, ok := get("LEGACY_WEBHOOK_URL"); ok {
		cfg.Forward.URL = v
	}
	if v, ok := get("LEGACY_WEBHOOK_HMAC_SECRET"); ok {
		cfg.Forward.HMACSecret = Secret(v)
	}
	if v, ok := get("AUTH_JWKS_URL"); ok {
		cfg.Auth.JWKSURL = v
	}
	if v, ok := get("ADMIN_PPROF_TOKEN"); ok {
		cfg.AdminPprofToken = Secret(v)
	}
	if v, ok := get("ADMIN_TOKEN"); ok {
		cfg.AdminToken = Secret(v)
	}
	if name := cfg.Auth.JWTSecretEnv; name != "" {
		if v, ok := get(name); ok {
			cfg.Auth.JWTSecret = Secret(v)
		}
	}
	return nil
}

func splitSecrets(v string) Secrets {
	var out Secrets
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, Secret(p))
		}
	}
	return out
}

// Redacted returns the configuration as YAML with every secret replaced by
// "[redacted]" (connection URLs included, as they carry passwords), for `borda config check`
// and start-up logs. Every other string value that holds a URL
// (forward.url, auth.jwks_url, routes[].upstream, redis.rest_url, and any
// field added later) is printed with its userinfo password and query
// values replaced by "xxxxx" (redact.URL).
func (c Config) Redacted() ([]byte, error) {
	return marshalRedacted(c) // yamlchunk.go: memory bounded by one route
}

// redactNode runs redact.URLs over every scalar of a YAML tree.
func redactNode(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		n.Value = redact.URLs(n.Value)
	}
	for _, c := range n.Content {
		redactNode(c)
	}
}

// StoreKind names the rate-limit/telemetry store the configuration selects:
// "redis" (URL set), "upstash-rest" (REST URL and token set) or "memory".
func (c Config) StoreKind() string {
	switch {
	case c.Redis.URL != "":
		return "redis"
	case c.Redis.RestURL != "":
		return "upstash-rest"
	default:
		return "memory"
	}
}
