package configs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/configs"
)

// roundTripEnv holds a value for every variable the shipped configs read,
// so each file checks as it would where it is deployed. Secrets are set
// here (never in the printed file): the round trip compares what the file
// says, and `config check` prints every secret redacted.
func roundTripEnv(name string) (string, bool) {
	env := map[string]string{
		"WEBHOOK_TOKENS":             "roundtrip-token-0123456789abcdef",
		"META_TOKENS":                "roundtrip-meta-0123456789abcdef",
		"META_APP_SECRET":            "roundtrip-app-secret-0123456789",
		"LEGACY_WEBHOOK_URL":         "https://legacy.example.org/hook",
		"LEGACY_WEBHOOK_HMAC_SECRET": "roundtrip-hmac-0123456789abcdef0123",
		"AUTH_JWT_SECRET":            "roundtrip-jwt-0123456789abcdef0123",
		"ADMIN_TOKEN":                "roundtrip-admin-0123456789abcdef",
		"AMQP_URL":                   "amqp://guest:guest@127.0.0.1:5672/",
		"DATABASE_URL":               "postgres://postgres@127.0.0.1:5432/test",
	}
	v, ok := env[name]
	return v, ok
}

// roundTripFiles are every shipped config (configs/*.yaml, the deployment
// configs under deploy/) and every valid test config.
func roundTripFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.yaml", "testdata/check/*.yaml", "../deploy/compose/borda.yaml",
		"../deploy/traefik/borda.yaml", "../deploy/kubernetes/overlays/*/borda.yaml"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 6 {
		t.Fatalf("found only %d configs: %v", len(files), files)
	}
	return files
}

// TestConfigCheckOutputIsTheSameConfig: for every shipped and test config
// that checks valid, the configuration `config check` prints, fed back in,
// checks valid, yields the same effective configuration (every field,
// defaults included: a route without `upgrades` tunnels websocket, and so
// must the printed file) and prints the same text again. The output used
// to carry `upgrades: []` for a route without the key, which turned
// WebSockets off when fed back.
func TestConfigCheckOutputIsTheSameConfig(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, file := range roundTripFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		first := configs.Check(data, roundTripEnv)
		if len(first.Errors) > 0 {
			if !strings.HasPrefix(file, "testdata/") {
				t.Errorf("%s: shipped config is invalid: %v", file, first.Errors)
			}
			continue
		}
		checked++
		printed, err := first.Config.Redacted()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		second := configs.Check(printed, roundTripEnv)
		if len(second.Errors) > 0 {
			t.Errorf("%s: the printed config is invalid: %v\n%s", file, second.Errors, printed)
			continue
		}
		if d := diffFields(first.Config, second.Config); d != "" {
			t.Errorf("%s: fed back, the printed config behaves differently:\n%s", file, d)
		}
		again, err := second.Config.Redacted()
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(printed) {
			t.Errorf("%s: printed twice, the effective config differs:\nfirst:\n%s\nsecond:\n%s", file, printed, again)
		}
	}
	if checked < 5 {
		t.Fatalf("only %d configs checked valid", checked)
	}
}

// nilMeansDefault are the list fields whose consumers tell an absent key
// (nil: the default) from an empty list (none): gateway's route upgrades,
// a route's cookies.forward, a webhook source's id_fields.
var nilMeansDefault = map[string]bool{"Upgrades": true, "Forward": true, "IDFields": true}

func lastField(path string) string {
	return path[strings.LastIndexByte(path, '.')+1:]
}

// diffFields names the fields (dotted Go paths) where a and b differ.
func diffFields(a, b any) string {
	var out []string
	var walk func(path string, x, y reflect.Value)
	walk = func(path string, x, y reflect.Value) {
		if reflect.DeepEqual(x.Interface(), y.Interface()) {
			return
		}
		// nil and empty lists are the same to every consumer, except
		// where nil means "the default" (nilMeansDefault): there, Check
		// must fill the default in, and the printed file must carry it.
		if x.Kind() == reflect.Slice && x.Len() == 0 && y.Len() == 0 && !nilMeansDefault[lastField(path)] {
			return
		}
		switch x.Kind() {
		case reflect.Struct:
			for i := 0; i < x.NumField(); i++ {
				if !x.Type().Field(i).IsExported() {
					out = append(out, path+"."+x.Type().Field(i).Name+": unexported field differs")
					continue
				}
				walk(path+"."+x.Type().Field(i).Name, x.Field(i), y.Field(i))
			}
			return
		case reflect.Map:
			for _, k := range x.MapKeys() {
				if y.MapIndex(k).IsValid() {
					walk(path+"["+fmtAny(k.Interface())+"]", x.MapIndex(k), y.MapIndex(k))
				}
			}
			if x.Len() == y.Len() {
				return
			}
		case reflect.Pointer:
			if !x.IsNil() && !y.IsNil() {
				walk(path, x.Elem(), y.Elem())
				return
			}
		case reflect.Slice:
			if x.Len() == y.Len() && !x.IsNil() && !y.IsNil() {
				for i := 0; i < x.Len(); i++ {
					walk(path+"["+strconvItoa(i)+"]", x.Index(i), y.Index(i))
				}
				return
			}
		}
		out = append(out, path+": "+fmtValue(x)+" vs "+fmtValue(y))
	}
	walk("", reflect.ValueOf(a), reflect.ValueOf(b))
	return strings.Join(out, "\n")
}

func strconvItoa(i int) string { return strconv.Itoa(i) }

func fmtValue(v reflect.Value) string {
	if v.Kind() == reflect.Slice && v.IsNil() {
		return "nil"
	}
	return fmtAny(v.Interface())
}

func fmtAny(x any) string { return fmt.Sprintf("%#v", x) }

// TestCheckFillsNilMeaningDefaults: the lists where an absent key means a
// default (and an empty list means none) come out of Check filled in, so
// the printed config says what is in force: a route's upgrades
// (websocket), a source's id_fields and routing_key (the webhook's).
func TestCheckFillsNilMeaningDefaults(t *testing.T) {
	t.Parallel()
	r := configs.Check([]byte(`environment: development
routes:
  - {name: a, upstream: "http://127.0.0.1:1"}
  - {name: b, path_prefix: /b, upstream: "http://127.0.0.1:2", upgrades: []}
webhook:
  path: /w
  id_fields: [instance, event]
  sources:
    - {name: s, path: /s}
    - {name: t, path: /t, id_fields: [], routing_key: t.key}
`), roundTripEnv)
	if len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	c := r.Config
	for _, tc := range []struct {
		what      string
		got, want any
	}{
		{"routes[0].upgrades", c.Routes[0].Upgrades, []string{"websocket"}},
		{"routes[1].upgrades", c.Routes[1].Upgrades, []string{}},
		{"sources[0].id_fields", c.Webhook.Sources[0].IDFields, []string{"instance", "event"}},
		{"sources[1].id_fields", c.Webhook.Sources[1].IDFields, []string{}},
		{"sources[0].routing_key", c.Webhook.Sources[0].RoutingKey, c.Webhook.RoutingKey},
		{"sources[1].routing_key", c.Webhook.Sources[1].RoutingKey, "t.key"},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %#v, want %#v", tc.what, tc.got, tc.want)
		}
	}
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "upgrades:\n        - websocket\n") {
		t.Errorf("printed config lacks the default upgrades:\n%s", out)
	}
}

// TestLocalConfigHasAShortRetryLadder: configs/local.yaml is for trying
// the pipeline on a laptop; with the production ladder a failing event took
// about 80 minutes to reach the DLQ. Its ladder now sums to under a minute.
func TestLocalConfigHasAShortRetryLadder(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := configs.Check(data, roundTripEnv)
	if len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	var sum time.Duration
	for _, d := range r.Config.Forward.RetryDelays {
		sum += d.D
	}
	if len(r.Config.Forward.RetryDelays) == 0 || sum > time.Minute {
		t.Errorf("local.yaml retry_delays %v sum to %s, want a ladder under 1m", r.Config.Forward.RetryDelays, sum)
	}
}

// TestCheckDoesNotWarnThatTheRESTStoreServesLess (issue 27 item 4):
// production.yaml with only the Upstash REST URL and token checks valid
// with no warning about the store. It used to warn that telemetry,
// aggregate, forward and the page's forwarders needed rediss://; they run
// over REST now (redisconn/restconn). With REDIS_URL set, no warning
// either.
func TestCheckDoesNotWarnThatTheRESTStoreServesLess(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("production.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rest := func(name string) (string, bool) {
		switch name {
		case "UPSTASH_REDIS_REST_URL":
			return "https://eu1-local.upstash.io", true
		case "UPSTASH_REDIS_REST_TOKEN":
			return "rest-token-0123456789abcdef0123456789", true
		}
		return roundTripEnv(name)
	}
	r := configs.Check(data, rest)
	if len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	if r.Config.StoreKind() != "upstash-rest" {
		t.Fatalf("store %s, want upstash-rest", r.Config.StoreKind())
	}
	withRESP := configs.Check(data, func(name string) (string, bool) {
		if name == "REDIS_URL" {
			return "rediss://default:pw@eu1-local.upstash.io:6379", true
		}
		return rest(name)
	})
	for _, c := range []configs.Report{r, withRESP} {
		for _, w := range c.Warnings {
			if strings.HasPrefix(w.Path, "redis.") || strings.Contains(w.Message, "rediss://") {
				t.Errorf("warned about the store: %v", w)
			}
		}
	}
}
