package configs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

func checkFixture(t *testing.T, name string, lookup func(string) (string, bool)) configs.Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/check", name))
	if err != nil {
		t.Fatal(err)
	}
	return configs.Check(data, lookup)
}

func findingLines(fs []configs.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// One run names every problem: unknown keys at the top and inside a list
// element, a bad duration and a wrong type (which used to stop decoding),
// and the validation problems, each with its field path and line. A
// problem that only follows from another (the rule's limit that did not
// decode "must be positive") is not repeated.
func TestCheckReportsEveryProblemInOneRun(t *testing.T) {
	t.Parallel()
	r := checkFixture(t, "several_problems.yaml", noEnv)
	sameLines(t, "errors", findingLines(r.Errors), []string{
		"listne: unknown key; did you mean `listen`? (line 4)",
		`redis.dial_timeout: "200" is not a duration (use Go syntax: 30ms, 5s, 1m) (line 6)`,
		`routes[1].upstream: "ftp://api:21" is not an absolute http(s) URL (line 19)`,
		"routes[2].path_prefx: unknown key; did you mean `path_prefix`? (line 21)",
		`routes[2].rate_limits[1]: "nope" is not a rule in rate_limits.rules (line 23)`,
		`rate_limits.rules[0].limit: want an integer, got "fifty" (line 28)`,
		"webhook.max_body_bytes: must be positive (bytes) (line 31)",
	})
}

// An unknown key deep in the file names the nearest key valid at its own
// level (cors.policies.<name>, routes[].cookies, a source's signature, a
// flow mapping), and lists that level's keys when none is near.
func TestCheckSuggestsTheNearestKeyAtEachLevel(t *testing.T) {
	t.Parallel()
	r := checkFixture(t, "nested_unknown_keys.yaml", noEnv)
	sameLines(t, "errors", findingLines(r.Errors), []string{
		"cors.policies.portal.alowed_origins: unknown key; did you mean `allowed_origins`? (line 6)",
		"routes[0].cookies.forwrd: unknown key; did you mean `forward`? (line 12)",
		"webhook.auth_failures.per_ipp: unknown key; did you mean `per_ip`? (line 16)",
		"webhook.sources[0].signature.secretenv: unknown key; did you mean `secret_env`? (line 20)",
		"forward.breaker.opn_for: unknown key; did you mean `open_for`? (line 22)",
		"forward.zzzzzz: unknown key (valid here: queue, dlq, prefetch, timeout, retry_delays, breaker, lease_ttl, retention_ttl, url, signature_versions, events_queue, events_binding) (line 23)",
	})
}

// A valid file whose webhook and forwarder cannot work is a warning naming
// the variable to set, and no error; with the variables set, no warning.
func TestCheckWarnsOfPartsThatCannotWork(t *testing.T) {
	t.Parallel()
	r := checkFixture(t, "incomplete_pipeline.yaml", noEnv)
	if len(r.Errors) != 0 {
		t.Fatalf("errors: %v", findingLines(r.Errors))
	}
	sameLines(t, "warnings", findingLines(r.Warnings), []string{
		"redis.url: `borda forward` will not start without a shared store for its idempotency keys: set REDIS_URL, or UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN (line 5)",
		"webhook.path: the ingress answers 503 to every webhook: no token to authenticate them; set WEBHOOK_TOKENS (comma-separated) (line 7)",
		`webhook.sources[0].tokens_env: source "meta" answers 503: META_TOKENS is unset or empty; set META_TOKENS (comma-separated) (line 11)`,
		`rate_limits.rules[0].scope: rule "api" counts per user, but with no key to verify a JWT no request has one, so the rule never applies: set AUTH_JWT_SECRET or AUTH_JWKS_URL (line 15)`,
		"forward.url: `borda forward` will not start, so accepted webhooks stay in yzex-connect-whatsapp-legacy-forward-queue: set LEGACY_WEBHOOK_URL",
		"forward: `borda forward` will not start without the secret that signs each POST: set LEGACY_WEBHOOK_HMAC_SECRET",
	})
	r = checkFixture(t, "incomplete_pipeline.yaml", envMap(map[string]string{
		"WEBHOOK_TOKENS": "t1", "META_TOKENS": "t2", "REDIS_URL": "redis://127.0.0.1:6379",
		"LEGACY_WEBHOOK_URL": "https://legacy.example.org/hook", "LEGACY_WEBHOOK_HMAC_SECRET": "s", "AUTH_JWT_SECRET": "j",
	}))
	if len(r.Errors)+len(r.Warnings) != 0 {
		t.Errorf("with every variable set: errors %v, warnings %v", findingLines(r.Errors), findingLines(r.Warnings))
	}
	// The Upstash REST URL and token alone serve the forwarder too.
	r = checkFixture(t, "incomplete_pipeline.yaml", envMap(map[string]string{
		"WEBHOOK_TOKENS": "t1", "META_TOKENS": "t2", "UPSTASH_REDIS_REST_URL": "https://eu1-local.upstash.io",
		"UPSTASH_REDIS_REST_TOKEN": "rest-token-0123456789abcdef0123456789",
		"LEGACY_WEBHOOK_URL":       "https://legacy.example.org/hook", "LEGACY_WEBHOOK_HMAC_SECRET": "s", "AUTH_JWT_SECRET": "j",
	}))
	if len(r.Errors)+len(r.Warnings) != 0 {
		t.Errorf("with the REST store: errors %v, warnings %v", findingLines(r.Errors), findingLines(r.Warnings))
	}
}

// Check accepts what Parse accepts, with the same effective configuration,
// and finds at least one problem in every file Parse refuses.
func TestCheckAgreesWithParse(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	files = append(files, "local.yaml", "staging.yaml", "production.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, perr := configs.Parse(data, noEnv)
		r := configs.Check(data, noEnv)
		switch {
		case perr != nil && len(r.Errors) == 0:
			t.Errorf("%s: Parse refuses (%v), Check finds nothing", f, perr)
		case perr == nil && len(r.Errors) > 0:
			t.Errorf("%s: Parse accepts, Check finds %v", f, findingLines(r.Errors))
		case perr == nil:
			want, _ := cfg.Redacted()
			got, _ := r.Config.Redacted()
			if string(got) != string(want) {
				t.Errorf("%s: Check's configuration differs from Parse's:\n%s\nwant\n%s", f, got, want)
			}
		}
	}
}

func TestCheckSyntaxErrorHasItsLine(t *testing.T) {
	t.Parallel()
	r := configs.Check([]byte("environment: development\nredis:\n  url: \"\"\nlisten: a: b\n"), noEnv)
	if len(r.Errors) != 1 || r.Errors[0].Line != 4 || !strings.HasPrefix(r.Errors[0].Message, "YAML syntax: ") {
		t.Errorf("errors = %v, want one YAML syntax error on line 4", findingLines(r.Errors))
	}
}

// A value of the wrong type in a flow mapping names the key it is under,
// not the first key on its line.
func TestCheckTypeErrorInFlowMappingNamesItsKey(t *testing.T) {
	t.Parallel()
	r := configs.Check([]byte("forward:\n  breaker: {failures: ten, open_for: 30s}\n"), noEnv)
	sameLines(t, "errors", findingLines(r.Errors), []string{`forward.breaker.failures: want an integer, got "ten" (line 2)`})
}

// A value of the wrong kind is named in the file's words, whatever the Go
// type behind it.
func TestCheckWrongKindsInTheFilesWords(t *testing.T) {
	t.Parallel()
	r := configs.Check([]byte("redis:\n  url: [a, b]\ntrusted_proxies: 10.0.0.0/8\nroutes: {a: 1}\n"), noEnv)
	sameLines(t, "errors", findingLines(r.Errors), []string{
		"redis.url: want a string, got a list (line 2)",
		`trusted_proxies: want a list, got "10.0.0.0/8" (line 3)`,
		"routes: want a list, got an object (line 4)",
	})
}

// A key the environment sets (and the file does not hold) is reported
// without a line; an empty file is the defaults.
func TestCheckFindingWithoutLine(t *testing.T) {
	t.Parallel()
	r := configs.Check(nil, envMap(map[string]string{"ENVIRONMENT": "prod"}))
	sameLines(t, "errors", findingLines(r.Errors), []string{`environment: "prod": want production, staging or development`})
}

// Keys is the reference's key list: every key docs/configuration.md's
// tables name is one of Keys, and the other way round.
func TestKeysAreTheReferenceKeys(t *testing.T) {
	t.Parallel()
	ref, err := configs.Reference(".")
	if err != nil {
		t.Fatal(err)
	}
	inRef := map[string]bool{}
	for _, line := range strings.Split(string(ref), "\n") {
		k, ok := strings.CutPrefix(line, "| `") // a table row
		if !ok {
			k, ok = strings.CutPrefix(line, "## `") // a section's heading
		}
		if ok {
			if k, _, ok = strings.Cut(k, "`"); ok && k != "" && k[0] >= 'a' && k[0] <= 'z' {
				inRef[k] = true
			}
		}
	}
	keys := configs.Keys()
	for _, k := range keys {
		if !inRef[k] {
			t.Errorf("%s is a key but not in the reference", k)
		}
		delete(inRef, k)
	}
	for k := range inRef {
		t.Errorf("the reference lists %s, which Keys does not", k)
	}
	if len(keys) < 50 {
		t.Errorf("%d keys, want the whole configuration", len(keys))
	}
}

// TestCheckSaysWhyTheOperatorPageCannotAct: with ADMIN_TOKEN set, config
// check names what the page's forms lack. A gateway with a shared store
// and no webhook pipeline used to be told it had "nothing to replay, unset
// ADMIN_TOKEN", though the token now relaxes limits from the page.
func TestCheckSaysWhyTheOperatorPageCannotAct(t *testing.T) {
	t.Parallel()
	const pipeline = "webhook:\n  path: /webhooks/whatsapp\n"
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       string // "" : no warning about the page
	}{
		{"admin off", "admin_listen: \"off\"\n", map[string]string{"REDIS_URL": "redis://127.0.0.1:6379"}, "admin_listen: ADMIN_TOKEN is set but the admin listener is off"},
		{"nothing to act on", "", nil, "webhook.path: ADMIN_TOKEN is set but the operator page has nothing to act on"},
		{"relax without a database", "", map[string]string{"REDIS_URL": "redis://127.0.0.1:6379"},
			"database.url: the operator page's relax form (ADMIN_TOKEN is set) refuses every request: each is recorded in PostgreSQL limit_relaxes; set DATABASE_URL"},
		{"replay without a database", pipeline, nil,
			"database.url: the operator page's replay form (ADMIN_TOKEN is set) refuses every request: each is recorded in PostgreSQL webhook_replays; set DATABASE_URL"},
		{"both without a database", pipeline, map[string]string{"REDIS_URL": "redis://127.0.0.1:6379"},
			"the operator page's replay and relax form"},
		{"relax with a database", "", map[string]string{"REDIS_URL": "redis://127.0.0.1:6379", "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/test"}, ""},
	} {
		env := map[string]string{"ADMIN_TOKEN": "page-token-0123456789abcdef0123"}
		for k, v := range tc.env {
			env[k] = v
		}
		file := "environment: development\nrate_limits:\n  rules:\n    - {name: burst, scope: ip, limit: 50, window: 5s}\n" + tc.file
		r := configs.Check([]byte(file), envMap(env))
		if len(r.Errors) > 0 {
			t.Fatalf("%s: errors %v", tc.name, findingLines(r.Errors))
		}
		var page []string
		for _, w := range findingLines(r.Warnings) {
			if strings.Contains(w, "ADMIN_TOKEN") || strings.Contains(w, "operator page") {
				page = append(page, w)
			}
		}
		switch {
		case tc.want == "" && len(page) > 0:
			t.Errorf("%s: warnings %v, want none about the page", tc.name, page)
		case tc.want != "" && (len(page) != 1 || !strings.Contains(page[0], tc.want)):
			t.Errorf("%s: warnings %v, want one saying %q", tc.name, page, tc.want)
		}
	}
}

// TestOperatorActionsAreWhatTheTokenEnables: the read-only notice at start
// said ADMIN_TOKEN would let the page "relax limits" on a gateway with
// the embedded store, which offers no relax. OperatorActions, which the
// notice and config check both use, names only what works.
func TestOperatorActionsAreWhatTheTokenEnables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file string
		env  map[string]string
		want string
	}{
		{"", nil, ""},
		{"webhook:\n  path: /webhooks/whatsapp\n", nil, "replay"},
		{"", map[string]string{"REDIS_URL": "redis://127.0.0.1:6379"}, "relax"},
		{"", map[string]string{"UPSTASH_REDIS_REST_URL": "https://127.0.0.1:1", "UPSTASH_REDIS_REST_TOKEN": "t"}, "relax"},
		{"webhook:\n  path: /webhooks/whatsapp\n", map[string]string{"REDIS_URL": "redis://127.0.0.1:6379"}, "replay,relax"},
	} {
		r := configs.Check([]byte("environment: development\n"+tc.file), envMap(tc.env))
		if len(r.Errors) > 0 {
			t.Fatalf("%q: %v", tc.file, findingLines(r.Errors))
		}
		actions, tables := r.Config.OperatorActions()
		if got := strings.Join(actions, ","); got != tc.want || len(tables) != len(actions) {
			t.Errorf("file %q env %v: actions %v (tables %v), want %q", tc.file, tc.env, actions, tables, tc.want)
		}
	}
}
