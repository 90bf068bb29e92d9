package configs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

const strongSecret = "0123456789abcdef0123456789abcdef" // 32 bytes

// parseProblems parses yaml with env and returns the validation problems
// (nil when valid).
func parseProblems(t *testing.T, yaml string, env map[string]string) (configs.Config, []string) {
	t.Helper()
	cfg, err := configs.Parse([]byte(yaml), envMap(env))
	if err == nil {
		return cfg, nil
	}
	var ve *configs.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("not a validation error: %v", err)
	}
	return cfg, ve.Problems
}

// TestProductionRefusesTrustedProxiesCoveringEveryone: a trusted_proxies
// entry that lets any client pick its own IP (the whole space, or wider
// than the largest private block of its family) is refused in
// production, in each spelling; proxy ranges are accepted.
func TestProductionRefusesTrustedProxiesCoveringEveryone(t *testing.T) {
	t.Parallel()
	for _, cidr := range []string{"0.0.0.0/0", "::/0", "::ffff:0:0/96", "0.0.0.0/1", "128.0.0.0/7", "2000::/3", "::/8", "2001::/15", "fc00::/6"} {
		_, probs := parseProblems(t, "environment: production\ntrusted_proxies: [\"10.0.0.0/8\", \""+cidr+"\"]\n", nil)
		if len(probs) != 1 || !strings.HasPrefix(probs[0], "trusted_proxies[1]: ") || !strings.Contains(probs[0], configs.AllowWeakProductionEnv) {
			t.Errorf("%s: problems %q, want one naming trusted_proxies[1]", cidr, probs)
		}
	}
	for _, cidr := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "104.16.0.0/13", "fc00::/7", "fd00::/8", "2606:4700::/32", "10.1.2.3"} {
		if _, probs := parseProblems(t, "environment: production\ntrusted_proxies: [\""+cidr+"\"]\n", nil); probs != nil {
			t.Errorf("%s refused: %q", cidr, probs)
		}
	}
	if _, probs := parseProblems(t, "environment: staging\ntrusted_proxies: [\"0.0.0.0/0\"]\n", nil); probs != nil {
		t.Errorf("staging keeps its freedom: %q", probs)
	}
}

// TestProductionRefusesShortSecrets: every credential Borda checks or signs
// with (WEBHOOK_TOKENS, a source's tokens, a signature secret, the HS256
// JWT secret, the forwarder's HMAC secret, the pprof token) is refused
// under 32 bytes in production.
func TestProductionRefusesShortSecrets(t *testing.T) {
	t.Parallel()
	const yaml = `environment: production
admin_pprof: token
webhook:
  sources:
    - name: crm
      path: /webhooks/crm
      tokens_env: CRM_TOKENS
    - name: gh
      path: /webhooks/gh
      signature: {scheme: github, secret_env: GH_SECRET}
`
	weak := map[string]string{
		"WEBHOOK_TOKENS":             strongSecret + ",short",
		"CRM_TOKENS":                 "short",
		"GH_SECRET":                  "short",
		"AUTH_JWT_SECRET":            "short",
		"LEGACY_WEBHOOK_HMAC_SECRET": "short",
		"ADMIN_PPROF_TOKEN":          "short",
		"ADMIN_TOKEN":                "short",
	}
	_, probs := parseProblems(t, yaml, weak)
	for _, field := range []string{"WEBHOOK_TOKENS[1]", "webhook.sources[0].tokens_env (CRM_TOKENS)[0]",
		"webhook.sources[1].signature.secret_env (GH_SECRET)[0]", "AUTH_JWT_SECRET", "LEGACY_WEBHOOK_HMAC_SECRET", "ADMIN_PPROF_TOKEN", "ADMIN_TOKEN"} {
		found := false
		for _, p := range probs {
			found = found || strings.HasPrefix(p, field)
		}
		if !found {
			t.Errorf("no problem names %s: %q", field, probs)
		}
	}
	if len(probs) != 7 {
		t.Errorf("%d problems, want 7: %q", len(probs), probs)
	}
	for _, p := range probs {
		if strings.Contains(p, "short") {
			t.Errorf("a problem echoes the secret: %q", p)
		}
	}
	strong := map[string]string{}
	for k := range weak {
		strong[k] = strongSecret
	}
	if _, probs := parseProblems(t, yaml, strong); probs != nil {
		t.Errorf("32-byte secrets refused: %q", probs)
	}
}

// TestWeakProductionOverrideTurnsRefusalsIntoWarnings: the documented
// override for test rigs (BORDA_ALLOW_WEAK_PRODUCTION=1) accepts the file
// and lists each guardrail as a warning; any other value does not.
func TestWeakProductionOverrideTurnsRefusalsIntoWarnings(t *testing.T) {
	t.Parallel()
	const yaml = "environment: production\ntrusted_proxies: [\"0.0.0.0/0\"]\n"
	env := map[string]string{"WEBHOOK_TOKENS": "short", configs.AllowWeakProductionEnv: "1"}
	cfg, probs := parseProblems(t, yaml, env)
	if probs != nil || len(cfg.Warnings) != 2 {
		t.Fatalf("problems %q, warnings %q: want none and 2", probs, cfg.Warnings)
	}
	env[configs.AllowWeakProductionEnv] = "true"
	if _, probs := parseProblems(t, yaml, env); len(probs) != 2 {
		t.Errorf("%s=true must not override: %q", configs.AllowWeakProductionEnv, probs)
	}
}

// TestAdminPprofValues: admin_pprof takes loopback, token (with its
// token) or off.
func TestAdminPprofValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml string
		env  map[string]string
		bad  bool
	}{
		{"admin_pprof: loopback\n", nil, false},
		{"admin_pprof: off\n", nil, false},
		{"admin_pprof: token\n", map[string]string{"ADMIN_PPROF_TOKEN": "x"}, false},
		{"admin_pprof: token\n", nil, true},
		{"admin_pprof: public\n", nil, true},
	} {
		_, probs := parseProblems(t, tc.yaml, tc.env)
		if bad := probs != nil; bad != tc.bad || bad && !strings.HasPrefix(probs[0], "admin_pprof: ") {
			t.Errorf("%q: problems %q", tc.yaml, probs)
		}
	}
	cfg, _ := parseProblems(t, "", nil)
	if cfg.AdminPprof != configs.PprofLoopback {
		t.Errorf("default admin_pprof %q, want loopback", cfg.AdminPprof)
	}
}

// TestValidationProblemsNeverEchoURLSecrets: a URL setting that does not
// validate is named, with its password and query values redacted, however
// it is broken (no scheme, wrong scheme, bad escape, unescaped '/').
func TestValidationProblemsNeverEchoURLSecrets(t *testing.T) {
	t.Parallel()
	_, probs := parseProblems(t, `routes:
  - name: a
    upstream: "ftp://u:CANARY@up/?t=CANARY"
`, map[string]string{
		"LEGACY_WEBHOOK_URL": "legacy:CANARY@host/hook?token=CANARY",
		"AUTH_JWKS_URL":      "https://u:CAN%zzARY@idp/jwks",
		"REDIS_URL":          "redis://u:CAN/ARY@127.0.0.1:6379",
		"AMQP_URL":           "http://guest:CANARY@rabbit/",
		"DATABASE_URL":       "postgres://u:CAN%zzARY@db/test",
	})
	for _, field := range []string{"routes[0].upstream", "forward.url", "auth.jwks_url", "amqp.url", "database.url"} {
		found := false
		for _, p := range probs {
			found = found || strings.HasPrefix(p, field+": ")
		}
		if !found {
			t.Errorf("no problem names %s: %q", field, probs)
		}
	}
	for _, p := range probs {
		if strings.Contains(p, "CAN") || strings.Contains(p, "ARY") {
			t.Errorf("problem echoes a secret: %q", p)
		}
	}
}

// Fresh attack pass A60: production accepted an http:// Upstash REST URL
// (the token is a full Redis credential on every request), plain amqp://
// and PostgreSQL without TLS to remote hosts, and an http:// legacy URL,
// with no word. The REST URL is refused, the others warned of, each naming
// the field and the host; loopback hosts, TLS URLs and hosts listed in
// cleartext_hosts pass silently, and BORDA_ALLOW_WEAK_PRODUCTION=1 makes
// the refusal a warning.
func TestProductionRefusesACleartextRESTTokenAndWarnsOfOtherCleartextCredentials(t *testing.T) {
	t.Parallel()
	refused := []struct {
		field string
		env   map[string]string
	}{
		{"redis.url", map[string]string{"REDIS_URL": "redis://:pw@redis.example.com:6379/0"}},
		{"redis.url", map[string]string{"REDIS_URL": "redis://10.0.0.5:6379"}},
		{"redis.rest_url", map[string]string{"UPSTASH_REDIS_REST_URL": "http://upstash.example.com", "UPSTASH_REDIS_REST_TOKEN": strongSecret}},
		{"amqp.url", map[string]string{"AMQP_URL": "amqp://guest:guest@rabbit.example.com:5672/atk2"}},
		{"amqp.url (address 2)", map[string]string{"AMQP_URL": "amqps://u:p@a.example.com/,amqp://u:p@b.example.com/"}},
		{"database.url", map[string]string{"DATABASE_URL": "postgres://postgres:pw@db.example.com:5432/atk2?sslmode=disable"}},
		{"database.url", map[string]string{"DATABASE_URL": "postgres://postgres:pw@db.example.com:5432/atk2"}},
		{"database.url", map[string]string{"DATABASE_URL": "postgresql://u:pw@db.example.com/x?sslmode=prefer"}},
		{"database.url", map[string]string{"DATABASE_URL": "postgres://u:pw@db.example.com/x?sslmode=allow"}},
		{"database.url", map[string]string{"DATABASE_URL": "postgres://u:pw@127.0.0.1:5432,db2.example.com:5432/x"}},
		{"database.url", map[string]string{"DATABASE_URL": "postgres://u:pw@db.example.com/x", "PGSSLMODE": "disable"}},
		{"database.url", map[string]string{"DATABASE_URL": "postgres://u:pw@localhost/x?host=db.example.com"}},
		{"forward.url", map[string]string{"LEGACY_WEBHOOK_URL": "http://legacy.example.com/hook"}},
		{"auth.jwks_url", map[string]string{"AUTH_JWKS_URL": "http://idp.example.com/.well-known/jwks.json"}},
		{"redis.url", map[string]string{"REDIS_URL": "redis://[2001:db8::1]:6379"}},
	}
	for _, tc := range refused {
		// Only the Upstash REST URL is refused; the others (in-cluster
		// services are commonly reached in cleartext) are one warning each.
		refuse := tc.field == "redis.rest_url"
		cfg, probs := parseProblems(t, "environment: production\n", tc.env)
		said := cfg.Warnings
		if refuse {
			said = probs
			if len(probs) != 1 || !strings.Contains(probs[0], configs.AllowWeakProductionEnv) {
				t.Errorf("%v: problems %q, want one naming %s", tc.env, probs, tc.field)
				continue
			}
		} else if probs != nil {
			t.Errorf("%v: problems %q, want a warning only", tc.env, probs)
			continue
		}
		if len(said) != 1 || !strings.HasPrefix(said[0], tc.field+": ") {
			t.Errorf("%v: said %q, want one line naming %s", tc.env, said, tc.field)
			continue
		}
		for _, secret := range []string{"pw", "guest:guest", strongSecret} {
			if strings.Contains(said[0], ":"+secret+"@") || strings.Contains(said[0], strongSecret) {
				t.Errorf("%v: %q shows a credential", tc.env, said[0])
			}
		}
		env := map[string]string{configs.AllowWeakProductionEnv: "1"}
		for k, v := range tc.env {
			env[k] = v
		}
		if cfg, probs := parseProblems(t, "environment: production\n", env); probs != nil || len(cfg.Warnings) != 1 {
			t.Errorf("%v with %s=1: problems %q, warnings %q, want one warning", tc.env, configs.AllowWeakProductionEnv, probs, cfg.Warnings)
		}
		if cfg, probs := parseProblems(t, "environment: staging\n", tc.env); probs != nil || len(cfg.Warnings) != 0 {
			t.Errorf("%v in staging: problems %q, warnings %q, want none", tc.env, probs, cfg.Warnings)
		}
	}
	accepted := []map[string]string{
		{"REDIS_URL": "rediss://:pw@redis.example.com:6380/0"},
		{"REDIS_URL": "redis://127.0.0.1:6379/0"},
		{"REDIS_URL": "redis://localhost:6379"},
		{"REDIS_URL": "redis://[::1]:6379"},
		{"UPSTASH_REDIS_REST_URL": "https://upstash.example.com", "UPSTASH_REDIS_REST_TOKEN": strongSecret},
		{"UPSTASH_REDIS_REST_URL": "http://127.0.0.1:8079", "UPSTASH_REDIS_REST_TOKEN": strongSecret},
		{"AMQP_URL": "amqps://u:p@rabbit.example.com:5671/v"},
		{"AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/"},
		{"AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/,amqp://guest:guest@localhost:5673/"},
		{"DATABASE_URL": "postgres://u:pw@db.example.com/x?sslmode=require"},
		{"DATABASE_URL": "postgres://u:pw@db.example.com/x?sslmode=verify-full"},
		{"DATABASE_URL": "postgres://u:pw@db.example.com/x", "PGSSLMODE": "verify-ca"},
		{"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"DATABASE_URL": "postgres://u:pw@localhost/x?host=/var/run/postgresql"},
		{"LEGACY_WEBHOOK_URL": "https://legacy.example.com/hook"},
		{"LEGACY_WEBHOOK_URL": "http://127.0.0.1:8081/hook"},
		{"AUTH_JWKS_URL": "https://idp.example.com/.well-known/jwks.json"},
	}
	for _, env := range accepted {
		if cfg, probs := parseProblems(t, "environment: production\n", env); probs != nil || len(cfg.Warnings) != 0 {
			t.Errorf("%v: problems %q, warnings %q, want none", env, probs, cfg.Warnings)
		}
	}
	// cleartext_hosts: the operator names the in-cluster hosts it trusts.
	yaml := "environment: production\ncleartext_hosts: [\"rabbitmq.borda.svc.cluster.local\", \"DB.internal\"]\n"
	for _, env := range []map[string]string{
		{"AMQP_URL": "amqp://u:p@rabbitmq.borda.svc.cluster.local:5672/"},
		{"DATABASE_URL": "postgres://u:pw@db.internal/x"},
	} {
		if cfg, probs := parseProblems(t, yaml, env); probs != nil || len(cfg.Warnings) != 0 {
			t.Errorf("%v with cleartext_hosts: problems %q, warnings %q, want none", env, probs, cfg.Warnings)
		}
	}
	if cfg, _ := parseProblems(t, yaml, map[string]string{"AMQP_URL": "amqp://u:p@rabbitmq.other.svc.cluster.local:5672/"}); len(cfg.Warnings) != 1 {
		t.Errorf("a host not in cleartext_hosts: warnings %q, want one", cfg.Warnings)
	}
}

// TestProductionWarnsThatAPolicyCanOverrideXOverflowWithoutAManagementURL:
// with a webhook ingress and no amqp.management_url, production warns
// that a broker policy's overflow overrides x-overflow on quorum queues
// and that the guard needs the management URL; set, the warning is gone
// and the URL's credentials appear nowhere.
func TestProductionWarnsThatAPolicyCanOverrideXOverflowWithoutAManagementURL(t *testing.T) {
	t.Parallel()
	const yaml = "environment: production\nwebhook:\n  path: /webhooks/whatsapp\n"
	env := map[string]string{"WEBHOOK_TOKENS": strongSecret}
	cfg, probs := parseProblems(t, yaml, env)
	if probs != nil {
		t.Fatalf("problems %q", probs)
	}
	var said []string
	for _, w := range cfg.Warnings {
		if strings.HasPrefix(w, "amqp.management_url: ") {
			said = append(said, w)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "overrides the queues' x-overflow: reject-publish on quorum queues") {
		t.Fatalf("warnings %q, want one naming amqp.management_url and the override", cfg.Warnings)
	}
	env["AMQP_MANAGEMENT_URL"] = "http://monitor:" + strongSecret + "@127.0.0.1:15672/"
	cfg, probs = parseProblems(t, yaml, env)
	if probs != nil {
		t.Fatalf("problems %q", probs)
	}
	for _, w := range cfg.Warnings {
		if strings.Contains(w, "amqp.management_url") || strings.Contains(w, strongSecret) {
			t.Errorf("warning %q with amqp.management_url set", w)
		}
	}
	if _, probs = parseProblems(t, yaml, map[string]string{"WEBHOOK_TOKENS": strongSecret, "AMQP_MANAGEMENT_URL": "amqp://x@127.0.0.1/"}); len(probs) != 1 || !strings.HasPrefix(probs[0], "amqp.management_url: ") {
		t.Errorf("an amqp:// management URL: problems %q, want one naming amqp.management_url", probs)
	}
}
