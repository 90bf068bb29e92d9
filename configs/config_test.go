package configs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

func noEnv(string) (string, bool) { return "", false }

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestShippedConfigsAreValid(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"local.yaml", "staging.yaml", "production.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := configs.Parse(data, noEnv)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := map[string]string{"local.yaml": "olp-dev:", "staging.yaml": "olp-stg:", "production.yaml": "olp:"}[name]
		if cfg.KeyPrefix() != want {
			t.Errorf("%s: key prefix %q, want %q", name, cfg.KeyPrefix(), want)
		}
	}
}

func TestLocalConfigRunsOnTheEmbeddedStore(t *testing.T) {
	t.Parallel()
	data, _ := os.ReadFile("local.yaml")
	cfg, err := configs.Parse(data, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StoreKind() != "memory" {
		t.Errorf("local.yaml store = %s, want memory", cfg.StoreKind())
	}
}

// Every fixture under testdata/invalid is refused with a problem naming the
// field in its file name's subject.
func TestInvalidConfigsNameTheField(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"unknown_key":                       `unknown key "listne"`,
		"bad_duration":                      "not a duration",
		"bad_environment":                   "environment:",
		"prefix_of_other_environment":       "redis.key_prefix:",
		"bad_upstream":                      "routes[0].upstream:",
		"missing_route_name":                "routes[0].name:",
		"duplicate_route":                   "routes[1].name:",
		"bad_trusted_proxy":                 "trusted_proxies[0]:",
		"bad_rule_scope":                    "rate_limits.rules[0].scope:",
		"bad_rule_window":                   "rate_limits.rules[0].window:",
		"unknown_rule_on_route":             "routes[a].rate_limits[0]:",
		"cors_wildcard_with_credentials":    "cors.policies.p.allowed_origins[0]:",
		"cors_null_with_credentials":        "cors.policies.p.allowed_origins[0]:",
		"unknown_cors_policy":               "routes[0].cors:",
		"bad_redis_url":                     "redis.url:",
		"lease_not_above_timeout":           "forward.lease_ttl:",
		"bad_webhook_path":                  "webhook.path:",
		"observe_limit_above_limit":         "rate_limits.rules[0].observe_limit:",
		"redis_password_not_escaped":        "redis.url:",
		"amqp_bad_port":                     "amqp.url:",
		"bad_listen":                        "listen:",
		"bad_client_ip_header":              "client_ip_header:",
		"bad_deny_cache_size":               "rate_limits.deny_cache_size:",
		"bad_on_store_error":                "rate_limits.on_store_error:",
		"bad_headers_with_underscores":      "headers_with_underscores:",
		"sliding_observe_limit":             "rate_limits.rules[0].observe_limit:",
		"bad_rule_algorithm":                "rate_limits.rules[0].algorithm:",
		"server_body_timeout_zero":          "server.body_timeout:",
		"server_negative_body_min_rate":     "server.body_min_rate:",
		"server_no_connections":             "server.max_connections:",
		"shutdown_confirm_drain_zero":       "shutdown.confirm_drain:",
		"shutdown_negative_readiness_grace": "shutdown.readiness_grace:",
	}
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) != len(want) {
		t.Errorf("%d fixtures, %d expectations: keep them in step", len(files), len(want))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		data, _ := os.ReadFile(f)
		_, err := configs.Parse(data, noEnv)
		if err == nil {
			t.Errorf("%s: accepted, want refused", name)
			continue
		}
		if w, ok := want[name]; !ok || !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not name %q", name, err, w)
		}
		if strings.Contains(err.Error(), "Secret") {
			t.Errorf("%s: error %q echoes a password", name, err)
		}
	}
}

func TestValidationListsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := configs.Parse([]byte("environment: prod\nrate_limits:\n  timeout: 0s\n"), noEnv)
	var ve *configs.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) < 2 {
		t.Fatalf("err = %v, want a ValidationError with both problems", err)
	}
}

func TestEnvironmentOverridesTheFile(t *testing.T) {
	t.Parallel()
	cfg, err := configs.Parse([]byte("environment: development\n"), envMap(map[string]string{
		"ENVIRONMENT":                "staging",
		"REDIS_URL":                  "rediss://default:pw@example.invalid:6380",
		"AMQP_URL":                   "amqp://u:p@broker:5672/",
		"DATABASE_URL":               "postgres://u:p@db/x",
		"WEBHOOK_TOKENS":             " new-token , old-token ,",
		"LEGACY_WEBHOOK_URL":         "https://legacy.example.invalid/hook",
		"LEGACY_WEBHOOK_HMAC_SECRET": "hmac",
		"AUTH_JWT_SECRET":            "jwt",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Environment != "staging" || cfg.KeyPrefix() != "olp-stg:" {
		t.Errorf("environment %q prefix %q", cfg.Environment, cfg.KeyPrefix())
	}
	if cfg.StoreKind() != "redis" || cfg.Redis.URL.Reveal() != "rediss://default:pw@example.invalid:6380" {
		t.Errorf("redis url not applied")
	}
	if len(cfg.Webhook.Tokens) != 2 || cfg.Webhook.Tokens[0].Reveal() != "new-token" || cfg.Webhook.Tokens[1].Reveal() != "old-token" {
		t.Errorf("tokens = %v", cfg.Webhook.Tokens)
	}
	if cfg.Forward.URL == "" || cfg.Forward.HMACSecret.Reveal() != "hmac" || cfg.Auth.JWTSecret.Reveal() != "jwt" {
		t.Errorf("forward/auth overrides not applied")
	}
}

func TestRedactedNeverPrintsASecret(t *testing.T) {
	t.Parallel()
	cfg, err := configs.Parse([]byte("environment: development\n"), envMap(map[string]string{
		"REDIS_URL":                  "redis://:s3cr3t-redis@127.0.0.1:6379",
		"WEBHOOK_TOKENS":             "s3cr3t-token",
		"LEGACY_WEBHOOK_HMAC_SECRET": "s3cr3t-hmac",
		"AUTH_JWT_SECRET":            "s3cr3t-jwt",
		"AMQP_URL":                   "amqp://guest:s3cr3t-amqp@127.0.0.1:5672/",
	}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cr3t") {
		t.Errorf("redacted config leaks a secret:\n%s", out)
	}
}

func TestKeyPrefixMayIsolateATestRun(t *testing.T) {
	t.Parallel()
	cfg, err := configs.Parse([]byte("environment: staging\nredis:\n  key_prefix: \"olp-stg:t42:\"\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KeyPrefix() != "olp-stg:t42:" {
		t.Errorf("prefix %q", cfg.KeyPrefix())
	}
}

func TestRetryQueueNamesKeepTheDelayAsWritten(t *testing.T) {
	t.Parallel()
	cfg, err := configs.Parse([]byte("forward:\n  retry_delays: [1m, 5m, 15m, 60m]\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range cfg.Forward.RetryDelays {
		names = append(names, d.Name)
	}
	if got := strings.Join(names, ","); got != "1m,5m,15m,60m" {
		t.Errorf("names %q", got)
	}
	if cfg.Forward.RetryDelays[3].D.Minutes() != 60 {
		t.Errorf("60m parsed as %v", cfg.Forward.RetryDelays[3].D)
	}
}

// The seed's rollout: the burst rule enforced everywhere; user and school
// rules enforced in staging and observed in production.
func TestRolloutEnforcesInStagingAndObservesInProduction(t *testing.T) {
	t.Parallel()
	want := map[string]map[string]string{
		"staging.yaml":    {"burst": "enforce", "api": "enforce", "escola": "enforce"},
		"production.yaml": {"burst": "enforce", "api": "observe", "escola": "observe"},
	}
	for file, modes := range want {
		data, _ := os.ReadFile(file)
		cfg, err := configs.Parse(data, noEnv)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range cfg.RateLimits.Rules {
			got[r.Name] = r.Mode
		}
		for rule, mode := range modes {
			if got[rule] != mode {
				t.Errorf("%s: rule %s mode %q, want %q", file, rule, got[rule], mode)
			}
		}
	}
}

// TestEventsQueueCanBeEmpty: `forward.events_queue: ""` is how a
// deployment that does not run `borda consume-events` declares no events
// queue (issue 23, item 4); it stays "" rather than taking the default.
func TestEventsQueueCanBeEmpty(t *testing.T) {
	cfg, err := configs.Parse([]byte("forward:\n  events_queue: \"\"\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Forward.EventsQueue != "" {
		t.Errorf("events_queue = %q, want empty", cfg.Forward.EventsQueue)
	}
}
