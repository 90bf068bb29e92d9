package configs

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/olp-edu/borda/internal/amqpaddr"
)

// Production guardrails (docs/configuration.md, "Production guardrails"):
// in environment production, settings that make the gateway trivially
// attackable are refused by Validate (so by `borda config check` and at
// the start of every command), unless AllowWeakProductionEnv is "1", which
// turns each refusal into a warning (Config.Warnings) for test rigs.

// AllowWeakProductionEnv names the environment variable that downgrades the
// production guardrails to warnings: "1" allows them. Meant for test rigs
// that run production files with short throwaway secrets; never set it in
// a real deployment.
const AllowWeakProductionEnv = "BORDA_ALLOW_WEAK_PRODUCTION"

// MinProductionSecretBytes is the shortest credential accepted in
// production: 32 bytes, the HS256 key size RFC 7518 §3.2 requires and 256
// bits of a random token.
const MinProductionSecretBytes = 32

// widestTrustedV4 and widestTrustedV6 are the shortest trusted_proxies
// prefix lengths accepted in production: no wider than the largest
// private block of each family (IPv4 10.0.0.0/8; IPv6 fc00::/7, the
// unique-local block, is the one /7 allowed, every other IPv6 prefix must
// be /16 or longer, as no proxy fleet spans more than a /16 of global
// unicast space).
const (
	widestTrustedV4 = 8
	widestTrustedV6 = 16
)

var uniqueLocalV6 = netip.MustParsePrefix("fc00::/7")

// validateProduction applies the guardrails in production. TrustedPrefixes
// must be parsed already (validateGateway).
func (c *Config) validateProduction(p *problems, lookup func(string) (string, bool)) {
	c.Warnings = nil
	if c.Environment != EnvProduction {
		return
	}
	var g problems
	for i, pfx := range c.TrustedPrefixes {
		if !trustedPrefixAcceptable(pfx) {
			g.addf(fmt.Sprintf("trusted_proxies[%d]", i),
				"%s covers too much of the address space for production (any client could set its own IP): list your proxies' ranges, IPv4 /%d or longer, IPv6 /%d or longer (fc00::/7 allowed)",
				pfx, widestTrustedV4, widestTrustedV6)
		}
	}
	short := func(field string, s Secret) {
		if s != "" && len(s.Reveal()) < MinProductionSecretBytes {
			g.addf(field, "is %d bytes; production needs at least %d (openssl rand -hex 32)", len(s.Reveal()), MinProductionSecretBytes)
		}
	}
	for i, t := range c.Webhook.Tokens {
		short(fmt.Sprintf("WEBHOOK_TOKENS[%d]", i), t)
	}
	for i, s := range c.Webhook.Sources {
		for j, t := range s.Tokens {
			short(fmt.Sprintf("webhook.sources[%d].tokens_env (%s)[%d]", i, s.TokensEnv, j), t)
		}
	}
	for i, s := range c.Webhook.Sources {
		if sig := s.Signature; sig != nil {
			for j, v := range sig.Secrets {
				short(fmt.Sprintf("webhook.sources[%d].signature.secret_env (%s)[%d]", i, sig.SecretEnv, j), v)
			}
		}
	}
	short(c.Auth.JWTSecretEnv+" (auth.jwt_secret_env)", c.Auth.JWTSecret)
	short("LEGACY_WEBHOOK_HMAC_SECRET", c.Forward.HMACSecret)
	if c.AdminPprof == PprofToken {
		short(AdminPprofTokenEnv+" (admin_pprof: token)", c.AdminPprofToken)
	}
	short(AdminTokenEnv, c.AdminToken)
	c.Warnings = append(c.Warnings, c.cleartextProblems(&g, lookup)...)
	if (c.Webhook.Path != "" || len(c.Webhook.Sources) > 0) && c.AMQP.ManagementURL == "" {
		c.Warnings = append(c.Warnings, "amqp.management_url: unset, so the webhook queues' effective length limit and overflow are not checked: "+
			"a broker policy's \"overflow\":\"drop-head\" overrides the queues' x-overflow: reject-publish on quorum queues (the default queue_type), "+
			"and with a max-length the broker then drops events it already confirmed; set amqp.management_url (AMQP_MANAGEMENT_URL) so the gateway "+
			"detects it and refuses to fill such a queue (docs/reliability.md, \"Length limits refuse, never drop\")")
	}
	if len(g) == 0 {
		return
	}
	if v, _ := lookup(AllowWeakProductionEnv); v == "1" {
		for _, w := range g {
			c.Warnings = append(c.Warnings, w+" (allowed by "+AllowWeakProductionEnv+"=1)")
		}
		return
	}
	for _, w := range g {
		*p = append(*p, w+" (test rigs only: "+AllowWeakProductionEnv+"=1 turns this into a warning)")
	}
}

// trustedPrefixAcceptable reports whether a trusted_proxies prefix is
// narrow enough for production.
func trustedPrefixAcceptable(pfx netip.Prefix) bool {
	if pfx.Addr().Is4() {
		return pfx.Bits() >= widestTrustedV4
	}
	if uniqueLocalV6.Bits() <= pfx.Bits() && uniqueLocalV6.Contains(pfx.Addr()) {
		return true
	}
	return pfx.Bits() >= widestTrustedV6
}

// Admin pprof modes (admin_pprof).
const (
	// PprofLoopback serves /debug/pprof/ on the admin listener to loopback
	// peers only (127.0.0.0/8, ::1): `kubectl port-forward` and `kubectl
	// exec` reach it, the cluster network does not (404).
	PprofLoopback = "loopback"
	// PprofToken serves it to any peer that sends
	// "Authorization: Bearer $ADMIN_PPROF_TOKEN" (401 otherwise).
	PprofToken = "token"
	// PprofOff does not serve it.
	PprofOff = "off"
)

// AdminPprofTokenEnv is the environment variable holding the admin_pprof
// token.
const AdminPprofTokenEnv = "ADMIN_PPROF_TOKEN"

// AdminTokenEnv is the environment variable holding the operator token of
// the operator page's replay form (docs/operations.md).
const AdminTokenEnv = "ADMIN_TOKEN"

func (c *Config) validateAdmin(p *problems) {
	switch c.AdminPprof {
	case PprofLoopback, PprofOff:
	case PprofToken:
		if c.AdminPprofToken == "" {
			p.addf("admin_pprof", "token needs %s set", AdminPprofTokenEnv)
		}
	default:
		p.addf("admin_pprof", "%q: want loopback, token or off", c.AdminPprof)
	}
}

// cleartextProblems judges each connection production would make without
// encryption to a host that is neither loopback nor in cleartext_hosts
// (fresh attack pass A60). An http:// Upstash REST URL is a problem (the
// REST store is reached over the internet, and its token, a full Redis
// credential, would cross readable on every request); the others are
// returned as warnings, since an in-cluster Redis, RabbitMQ, PostgreSQL,
// legacy endpoint or identity provider is commonly reached in cleartext
// and Borda cannot tell the cluster's network from the internet: the
// warning names the field, the host and the fix, never a credential.
// Route upstreams are not checked: a gateway reaches its upstreams in the
// cluster over http://, as Envoy, nginx and Traefik do by default.
func (c *Config) cleartextProblems(g *problems, lookup func(string) (string, bool)) (warnings []string) {
	var w problems
	trusted := func(host string) bool {
		if isLoopbackHost(host) {
			return true
		}
		for _, h := range c.CleartextHosts {
			if strings.EqualFold(strings.TrimSpace(h), host) {
				return true
			}
		}
		return false
	}
	const remedy = "or list the host in cleartext_hosts if the network to it is trusted"
	if raw := c.Redis.URL.Reveal(); raw != "" {
		if u, err := url.Parse(raw); err == nil && u.Scheme == "redis" && !trusted(u.Hostname()) {
			w.addf("redis.url", "reaches %s over redis:// (no TLS: the password and every key cross in cleartext); use rediss://, %s", u.Hostname(), remedy)
		}
	}
	if c.Redis.URL == "" && c.Redis.RestURL != "" {
		if u, err := url.Parse(c.Redis.RestURL); err == nil && u.Scheme == "http" && !trusted(u.Hostname()) {
			g.addf("redis.rest_url", "reaches %s over http:// (UPSTASH_REDIS_REST_TOKEN, a full Redis credential, crosses in cleartext on every request); use https://, %s", u.Hostname(), remedy)
		}
	}
	for i, raw := range amqpaddr.Fields(c.AMQP.URL.Reveal()) {
		field := "amqp.url"
		if strings.Contains(c.AMQP.URL.Reveal(), ",") {
			field = fmt.Sprintf("amqp.url (address %d)", i+1)
		}
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.Scheme == "amqp" && !trusted(u.Hostname()) {
			w.addf(field, "reaches %s over amqp:// (no TLS: the broker password and every event cross in cleartext); use amqps://, %s", u.Hostname(), remedy)
		}
	}
	if raw := c.Database.URL.Reveal(); raw != "" {
		if u, err := url.Parse(raw); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
			mode := u.Query().Get("sslmode")
			if mode == "" {
				mode, _ = lookup("PGSSLMODE")
			}
			if mode == "" {
				mode = "prefer" // libpq's and pgx's default
			}
			if mode != "require" && mode != "verify-ca" && mode != "verify-full" {
				for _, h := range postgresHosts(u) {
					if !trusted(h) {
						w.addf("database.url", "reaches %s with sslmode=%s (the password and the data may cross in cleartext; prefer and allow fall back to it); set sslmode=require or verify-full, %s", h, mode, remedy)
						break
					}
				}
			}
		}
	}
	for _, f := range []struct{ field, raw, what string }{
		{"amqp.management_url", c.AMQP.ManagementURL.Reveal(), "the management API's credentials cross in cleartext"},
		{"forward.url", c.Forward.URL, "events and the URL's credentials cross in cleartext"},
		{"auth.jwks_url", c.Auth.JWKSURL, "anyone on the path could serve keys that sign any token"},
	} {
		if u, err := url.Parse(f.raw); err == nil && u.Scheme == "http" && !trusted(u.Hostname()) {
			w.addf(f.field, "reaches %s over http:// (%s); use https://, %s", u.Hostname(), f.what, remedy)
		}
	}
	return w
}

// postgresHosts returns the hosts a PostgreSQL URL names: each of a
// comma-separated host list, or the host query parameter's; a Unix socket
// directory ("/var/run/postgresql") or no host at all is local and left
// out.
func postgresHosts(u *url.URL) []string {
	list := u.Host
	if q := u.Query().Get("host"); q != "" {
		list = q
	}
	var out []string
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		if h == "" || strings.HasPrefix(h, "/") {
			continue
		}
		if strings.HasPrefix(h, "[") {
			if i := strings.IndexByte(h, ']'); i > 0 {
				h = h[1:i]
			}
		} else if strings.Count(h, ":") == 1 {
			h, _, _ = strings.Cut(h, ":")
		}
		out = append(out, h)
	}
	return out
}

// isLoopbackHost reports whether host is localhost (or a name under
// .localhost, RFC 6761) or a loopback address (127.0.0.0/8, ::1, and
// their IPv4-mapped forms). An empty host is a local default.
func isLoopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "" || h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}
