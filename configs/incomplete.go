package configs

import (
	"fmt"
	"slices"
	"strings"
)

// Incomplete lists the parts c enables that cannot work as configured,
// each naming the environment variable (or key) to set. They are warnings,
// not problems: the file is valid, and a gateway with a webhook it cannot
// authenticate still serves its routes (the webhook paths answer 503,
// docs/webhooks.md). `borda config check` prints them; Line is left 0 for
// Check to fill. Call it on a validated configuration (Parse, Check), where
// the environment has been applied.
//
// The cases:
//   - webhook.path with no WEBHOOK_TOKENS: the ingress answers 503;
//   - a webhook source whose tokens_env or signature.secret_env variable is
//     unset, or that has neither and no WEBHOOK_TOKENS to fall back on;
//   - the ingress on and `borda forward` unable to start: no forward.url
//     (LEGACY_WEBHOOK_URL), no LEGACY_WEBHOOK_HMAC_SECRET, no shared store
//     for its idempotency keys (REDIS_URL, or UPSTASH_REDIS_REST_URL and
//     its token: everything that uses Redis works on either);
//   - a rate-limit rule counting users or schools with no JWT key
//     (auth.jwt_secret_env's variable or AUTH_JWKS_URL) to verify tokens
//     with, so no request carries a user or a school;
//   - ADMIN_TOKEN set where the operator page cannot act: the admin
//     listener off, neither a webhook pipeline (replay) nor a shared store
//     (relax), or no database.url (DATABASE_URL) for the webhook_replays
//     and limit_relaxes audits (the forms would refuse every request).
func (c Config) Incomplete() []Finding {
	var out []Finding
	add := func(path, format string, args ...any) {
		out = append(out, Finding{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	w := c.Webhook
	if w.Path != "" && len(w.Tokens) == 0 {
		add("webhook.path", "the ingress answers 503 to every webhook: no token to authenticate them; set WEBHOOK_TOKENS (comma-separated)")
	}
	for i, s := range w.Sources {
		f := fmt.Sprintf("webhook.sources[%d]", i)
		switch {
		case s.TokensEnv != "" && len(s.Tokens) == 0:
			add(f+".tokens_env", "source %q answers 503: %s is unset or empty; set %s (comma-separated)", s.Name, s.TokensEnv, s.TokensEnv)
		case s.TokensEnv == "" && s.Signature == nil && len(w.Tokens) == 0:
			add(f, "source %q answers 503: no tokens_env, no signature and no WEBHOOK_TOKENS to fall back on; set WEBHOOK_TOKENS or the source's tokens_env", s.Name)
		}
		if sig := s.Signature; sig != nil && (sig.SecretEnv != "" || len(sig.SecretEnvs) > 0) && len(sig.Secrets) == 0 {
			var names []string
			if sig.SecretEnv != "" {
				names = append(names, sig.SecretEnv)
			}
			names = append(names, sig.SecretEnvs...)
			add(f+".signature.secret_env", "source %q answers 503: %s is unset or empty; set it", s.Name, strings.Join(names, ", "))
		} else if sig != nil {
			// Some secrets read, some variables unset: a rotation half
			// done, or a typo that silently drops a secret (attack B47).
			for _, name := range sig.Unset {
				add(f+".signature.secret_envs", "source %q: %s is unset or empty, so its secret is not accepted (the source verifies with its other secrets only); set it or remove it from the list", s.Name, name)
			}
		}
		if sig := s.Signature; sig != nil {
			for _, sec := range sig.Secrets {
				if !usableSigningSecret(sig.Scheme, sec.Reveal()) {
					add(f+".signature.secret_env", "source %q answers 503 (the other sources are served): one of its signing secrets is unusable (empty, or for standard not whsec_ and the base64 of a non-empty key); fix the variable", s.Name)
					break
				}
			}
		}
		if sig := s.Signature; sig != nil && sig.Scheme == "github" {
			for _, sec := range sig.Secrets {
				if strings.Contains(sec.Reveal(), ",") {
					add(f+".signature.secret_env", "source %q: a secret holds a comma; it is taken as one whole secret (github secrets are free text), not as a rotation list: to accept two secrets, name the second variable in secret_envs", s.Name)
					break
				}
			}
		}
	}
	if w.Path != "" || len(w.Sources) > 0 {
		// The ingress fills forward.queue; `borda forward` empties it.
		if c.Forward.URL == "" {
			add("forward.url", "`borda forward` will not start, so accepted webhooks stay in %s: set LEGACY_WEBHOOK_URL", c.Forward.Queue)
		}
		if c.Forward.HMACSecret == "" {
			add("forward", "`borda forward` will not start without the secret that signs each POST: set LEGACY_WEBHOOK_HMAC_SECRET")
		}
		if c.StoreKind() == "memory" {
			add("redis.url", "`borda forward` will not start without a shared store for its idempotency keys: set REDIS_URL, or UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN")
		}
	}
	// The operator page's actions (docs/operations.md, "Replaying" and
	// "Relaxing"): replay needs the webhook pipeline, relax a shared store,
	// and both the database that records them.
	if c.AdminToken != "" {
		forms, tables := c.OperatorActions()
		switch {
		case c.AdminListen == "off":
			add("admin_listen", "ADMIN_TOKEN is set but the admin listener is off, so there is no operator page (/ui) to replay or relax from: set admin_listen or unset ADMIN_TOKEN")
		case len(forms) == 0:
			add("webhook.path", "ADMIN_TOKEN is set but the operator page has nothing to act on: no webhook pipeline (dead letters to replay) and the embedded store (a relax needs a shared store): set webhook.path or REDIS_URL, or unset ADMIN_TOKEN")
		case c.Database.URL == "":
			add("database.url", "the operator page's %s form (ADMIN_TOKEN is set) refuses every request: each is recorded in PostgreSQL %s; set DATABASE_URL",
				strings.Join(forms, " and "), strings.Join(tables, " and "))
		}
	}
	if c.Auth.JWTSecret == "" && c.Auth.JWKSURL == "" {
		for i, r := range c.RateLimits.Rules {
			if slices.Contains([]string{"user", "escola"}, r.Scope) {
				secret := c.Auth.JWTSecretEnv
				if secret == "" {
					secret = "auth.jwt_secret_env"
				}
				add(fmt.Sprintf("rate_limits.rules[%d].scope", i),
					"rule %q counts per %s, but with no key to verify a JWT no request has one, so the rule never applies: set %s or AUTH_JWKS_URL", r.Name, r.Scope, secret)
			}
		}
	}
	return out
}

// OperatorActions are what ADMIN_TOKEN lets the operator page do with c
// (docs/operations.md): "replay" with a webhook pipeline, "relax" with a
// shared store (the embedded store's relax would reach no other process);
// tables are the PostgreSQL audits they record in, in the same order.
func (c Config) OperatorActions() (actions, tables []string) {
	if c.Webhook.Path != "" || len(c.Webhook.Sources) > 0 {
		actions, tables = append(actions, "replay"), append(tables, "webhook_replays")
	}
	if c.StoreKind() != "memory" {
		actions, tables = append(actions, "relax"), append(tables, "limit_relaxes")
	}
	return actions, tables
}
