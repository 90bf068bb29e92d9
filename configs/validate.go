package configs

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/olp-edu/borda/internal/amqpaddr"
	"github.com/olp-edu/borda/internal/redact"
)

// ValidationError lists every problem found in a configuration, one per
// line, each naming its field ("routes[0].upstream: is required").
// `borda` prints it and exits with code 2.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "invalid config:\n  " + strings.Join(e.Problems, "\n  ")
}

type problems []string

// addf adds one problem. Its text passes through redact.URLs, so no
// message echoes a URL's password or query values, whichever field it
// names (URL settings quote their value with showURL).
func (p *problems) addf(field, format string, args ...any) {
	*p = append(*p, redact.URLs(field+": "+fmt.Sprintf(format, args...)))
}

// EnvPrefix returns the Redis key prefix of an environment: olp: for
// production, olp-stg: for staging, olp-dev: for development, "" for an
// unknown one.
func EnvPrefix(env string) string {
	switch env {
	case EnvProduction:
		return "olp:"
	case EnvStaging:
		return "olp-stg:"
	case EnvDevelopment:
		return "olp-dev:"
	}
	return ""
}

// KeyPrefix returns the effective Redis key prefix: redis.key_prefix when
// set (Validate checks it starts with the environment's), else the
// environment's.
func (c Config) KeyPrefix() string {
	if c.Redis.KeyPrefix != "" {
		return c.Redis.KeyPrefix
	}
	return EnvPrefix(c.Environment)
}

// Validate checks the whole configuration, fills derived fields (parsed
// CIDRs and URLs, rule defaults) and returns a *ValidationError listing
// every problem, or nil.
func (c *Config) Validate() error {
	return c.validate(os.LookupEnv)
}

// validate runs every section's check in the order of
// docs/configuration.md and lists every problem; lookup reads the
// environment (the secrets a section names).
func (c *Config) validate(lookup func(string) (string, bool)) error {
	var p problems
	c.validateConnections(&p)
	c.validateListeners(&p)
	c.validateShutdownAndServer(&p)
	c.validateGateway(&p)
	validateDeny(&p, "deny", c.Deny, true)
	for i, rt := range c.Routes {
		validateDeny(&p, fmt.Sprintf("routes[%d].deny", i), rt.Deny, false)
	}
	c.validateRateLimits(&p)
	c.validateTelemetry(&p)
	c.validateWebhook(&p, lookup)
	c.validateForward(&p)
	c.validateAdmin(&p)
	c.validateProduction(&p, lookup)
	c.Warnings = append(c.Warnings, c.sessionByDefault()...)
	c.Warnings = append(c.Warnings, c.Webhook.sharedCredentials()...)
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

// validateConnections checks the environment and what the processes
// connect to: Redis (its key prefix, URL or REST endpoint, timeouts),
// RabbitMQ (one URL or a comma-separated list of a cluster's nodes,
// tried in turn from a random start: internal/amqpaddr) and PostgreSQL.
func (c *Config) validateConnections(p *problems) {
	envPrefix := EnvPrefix(c.Environment)
	if envPrefix == "" {
		p.addf("environment", "%q: want production, staging or development", c.Environment)
	}
	if c.Redis.KeyPrefix != "" && envPrefix != "" && !strings.HasPrefix(c.Redis.KeyPrefix, envPrefix) {
		p.addf("redis.key_prefix", "%q must start with %q in %s (a %s process never writes another environment's keys)",
			c.Redis.KeyPrefix, envPrefix, c.Environment, c.Environment)
	}
	if c.Redis.KeyPrefix != "" && !strings.HasSuffix(c.Redis.KeyPrefix, ":") {
		p.addf("redis.key_prefix", "%q must end with ':'", c.Redis.KeyPrefix)
	}
	checkSecretURL(p, "redis.url", c.Redis.URL, "redis", "rediss")
	if raw := c.AMQP.URL.Reveal(); strings.Contains(raw, ",") {
		for i, u := range amqpaddr.Fields(raw) {
			field := fmt.Sprintf("amqp.url (address %d)", i+1)
			if strings.TrimSpace(u) == "" {
				p.addf(field, "is empty (a stray comma)")
				continue
			}
			checkSecretURL(p, field, Secret(strings.TrimSpace(u)), "amqp", "amqps")
		}
	} else {
		checkSecretURL(p, "amqp.url", c.AMQP.URL, "amqp", "amqps")
	}
	checkSecretURL(p, "amqp.management_url", c.AMQP.ManagementURL, "http", "https")
	checkSecretURL(p, "database.url", c.Database.URL, "postgres", "postgresql")
	if c.Redis.RestURL != "" {
		if !strings.HasPrefix(c.Redis.RestURL, "https://") && !strings.HasPrefix(c.Redis.RestURL, "http://") {
			p.addf("redis.rest_url", "must be an http(s) URL")
		}
		if c.Redis.RestToken == "" {
			p.addf("redis.rest_token", "is required with redis.rest_url (UPSTASH_REDIS_REST_TOKEN)")
		}
	}
	if c.Redis.DialTimeout <= 0 || c.Redis.ReadTimeout <= 0 || c.Redis.WriteTimeout <= 0 {
		p.addf("redis", "dial_timeout, read_timeout and write_timeout must be positive")
	}
}

// validateListeners checks the listen addresses and what the public
// listener reads of a request's header (underscored names, the client-IP
// header).
func (c *Config) validateListeners(p *problems) {
	checkListen(p, "listen", c.Listen)
	if c.AdminListen != "off" {
		checkListen(p, "admin_listen", c.AdminListen)
	}
	switch c.HeadersWithUnderscores {
	case "drop", "allow":
	default:
		p.addf("headers_with_underscores", "%q: want drop or allow", c.HeadersWithUnderscores)
	}
	if h := c.ClientIPHeader; h != "" && !validHeaderName(h) {
		p.addf("client_ip_header", "%q is not a header name", h)
	}
}

// validateShutdownAndServer checks the shutdown's waits and the HTTP
// server's bounds (send and body timeouts, connection caps).
func (c *Config) validateShutdownAndServer(p *problems) {
	if c.Shutdown.Drain < 0 {
		p.addf("shutdown.drain", "must not be negative")
	}
	if c.Shutdown.ReadinessGrace < 0 {
		p.addf("shutdown.readiness_grace", "must not be negative")
	}
	if c.Shutdown.ConfirmDrain <= 0 {
		p.addf("shutdown.confirm_drain", "must be positive (outstanding confirms need time to arrive)")
	}
	s := c.Server
	if s.SendTimeout <= 0 {
		p.addf("server.send_timeout", "must be positive")
	}
	if s.BodyTimeout <= 0 {
		p.addf("server.body_timeout", "must be positive")
	}
	if s.BodyMinRate < 0 {
		p.addf("server.body_min_rate", "must not be negative (bytes per second; 0 turns the rate check off)")
	}
	if s.MaxConnections < 1 {
		p.addf("server.max_connections", "must be at least 1, got %d", s.MaxConnections)
	}
	if s.MaxConnectionsPerIP < 0 {
		p.addf("server.max_connections_per_ip", "must not be negative (0 turns the per-IP cap off), got %d", s.MaxConnectionsPerIP)
	}
	if s.AdminMaxConnections < 1 {
		p.addf("server.admin_max_connections", "must be at least 1, got %d", s.AdminMaxConnections)
	}
}

// checkName adds a problem to field when name is not a valid name
// (validName) or is already in names (taken says by what), then records
// it in names.
func checkName(p *problems, field, name string, names map[string]bool, taken string) {
	if !validName(name) {
		p.addf(field, "%q: required; use letters, digits, '-' and '_'", name)
	} else if names[name] {
		p.addf(field, "%q %s", name, taken)
	}
	names[name] = true
}

// checkSecretURL checks that a connection URL parses and has one of the
// schemes and a host, never echoing the URL (it carries a password).
func checkSecretURL(p *problems, field string, v Secret, schemes ...string) {
	raw := v.Reveal()
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		p.addf(field, "does not parse as a URL (percent-encode reserved characters such as / # ? @ in the password)")
		return
	}
	if !oneOf(u.Scheme, schemes) {
		p.addf(field, "scheme %q: want %s://", u.Scheme, strings.Join(schemes, ":// or "))
		return
	}
	if u.Hostname() == "" {
		p.addf(field, "has no host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			p.addf(field, "port %q is not a TCP port", port)
		}
	}
}

// checkListen checks a listen address ("host:port", ":port").
func checkListen(p *problems, field, addr string) {
	if addr == "" {
		p.addf(field, "is required")
		return
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.addf(field, "%q is not host:port (\":8080\", \"127.0.0.1:9091\")", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.addf(field, "port %q is not a TCP port", port)
	}
}

// validHeaderName reports whether h is an HTTP field name (RFC 9110 token).
func validHeaderName(h string) bool {
	for _, r := range h {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return h != ""
}
