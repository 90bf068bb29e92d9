package main

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/configs"
)

// The mappers in options_<area>.go are tested generatively: fill sets
// every exported field of a configuration section to a non-zero value,
// the mapper runs, and zeroFields lists every option left at its zero
// value. An option the mapper forgets (a deleted line in
// options_gateway.go, a field added to a package's Options and never
// mapped) is zero and fails the test, unless the test names it as
// filled elsewhere, with the reason.

// fill sets every settable field reachable from v to a non-zero value:
// strings "x", numbers 7, booleans true, durations 7 s, one element in
// each slice and map, pointers allocated.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fill(f)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeFor[configs.Duration]() || v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(int64(7 * time.Second))
		} else {
			v.SetInt(7)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	}
}

// zeroFields returns the paths (Routes[0].CORS.MaxAge) of every zero
// value reachable from v, descending into Borda's own struct types;
// a struct of another module (url.URL, netip.Prefix) is one value.
func zeroFields(v reflect.Value, path string) []string {
	if v.IsZero() {
		return []string{strings.TrimPrefix(path, ".")}
	}
	switch v.Kind() {
	case reflect.Pointer:
		return zeroFields(v.Elem(), path)
	case reflect.Struct:
		if !strings.HasPrefix(v.Type().PkgPath(), module) {
			return nil
		}
		var out []string
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
			}
		}
		return out
	case reflect.Slice:
		var out []string
		for i := range v.Len() {
			out = append(out, zeroFields(v.Index(i), path+"["+itoa(i)+"]")...)
		}
		return out
	}
	return nil
}

const module = "github.com/olp-edu/borda"

func itoa(i int) string { return string(rune('0' + i)) }

// checkMapped fails t for every zero option of opts not in filledElsewhere
// (path → why the mapper leaves it zero), and for every listed path that
// is in fact set (the list must stay true).
func checkMapped(t *testing.T, opts any, filledElsewhere map[string]string) {
	t.Helper()
	zero := zeroFields(reflect.ValueOf(opts), "")
	for _, p := range zero {
		if _, ok := filledElsewhere[p]; !ok {
			t.Errorf("%T.%s stays zero when every configuration field is set: the mapper does not map it", opts, p)
		}
	}
	for p := range filledElsewhere {
		if !slices.Contains(zero, p) {
			t.Errorf("%T.%s is listed as filled elsewhere but the mapper sets it: drop it from the list", opts, p)
		}
	}
}

// filledConfig is a configuration with every field set (fill), and the
// enumerations set to a word that maps to a non-zero typed value.
func filledConfig(t *testing.T) configs.Config {
	t.Helper()
	var cfg configs.Config
	fill(reflect.ValueOf(&cfg))
	cfg.TrustedPrefixes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cfg.EscapedSlashes = "reject"
	cfg.HeadersWithUnderscores = "allow"
	cfg.AdminPprof = configs.PprofToken
	for i := range cfg.Routes {
		cfg.Routes[i].Upstream = "http://127.0.0.1:1"
		cfg.Routes[i].UpstreamURL = nil
		cfg.Routes[i].EscapedSlashes = "unescape"
		for j := range cfg.Routes[i].Cookies.Forward {
			cfg.Routes[i].Cookies.Forward[j].As = "authorization"
		}
		for k := range cfg.CORS.Policies {
			cfg.Routes[i].CORS = k
		}
	}
	return cfg
}

func TestGatewayOptionsMapEveryField(t *testing.T) {
	opts, err := gatewayOptions(filledConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	checkMapped(t, opts, map[string]string{
		"Deny": "built by denyLists.build (options_deny.go), tested there",
	})
}

func TestIdentityOptionsMapEveryField(t *testing.T) {
	checkMapped(t, identityOptions(filledConfig(t).Auth), map[string]string{"Clock": "nil: the wall clock (a test's clock)"})
}

func TestRecorderOptionsMapEveryField(t *testing.T) {
	checkMapped(t, recorderOptions(filledConfig(t).Telemetry), map[string]string{"Clock": "nil: the wall clock (a test's clock)"})
}

func TestRedisOptionsMapEveryField(t *testing.T) {
	checkMapped(t, redisOptions(filledConfig(t).Redis), map[string]string{"Cold": "set by the one-shot commands (aggregate, limits), not configuration"})
}

func TestLimiterOptionsMapEveryField(t *testing.T) {
	cfg := filledConfig(t)
	for i := range cfg.RateLimits.Rules {
		r := &cfg.RateLimits.Rules[i]
		r.Scope, r.Algorithm, r.Mode = "user", "gcra", "observe"
	}
	cfg.RateLimits.OnStoreError = "local"
	checkMapped(t, limiterOptions(cfg), map[string]string{"Clock": "nil: the wall clock (a test's clock)"})
}

func TestForwardOptionsMapEveryField(t *testing.T) {
	cfg := filledConfig(t)
	cfg.Webhook.Path = "" // one source: LegacySource is its name (both: no sole source)
	checkMapped(t, forwardOptions(cfg), map[string]string{
		"Redis":             "the caller's (forward.go), like Keys, Logger and Registerer",
		"Keys":              "the caller's",
		"Logger":            "the caller's",
		"Registerer":        "the caller's",
		"HTTPClient":        "nil: the forwarder builds its own from Timeout",
		"Clock":             "nil: the wall clock (a test's clock)",
		"PublishTimeout":    "not configurable: 0 is the forwarder's 5 s",
		"PublishRegisterer": "nil: the republisher's metrics stay unregistered",
		"SampleEvery":       "not configurable: 0 is the forwarder's default",
		"Reconnect":         "not configurable: 0 is the forwarder's default",
	})
}

func TestIngressOptionsMapEveryField(t *testing.T) {
	// The flat webhook.path source has no signature or redaction of its
	// own: map the sources list alone, then the flat path alone.
	w := filledConfig(t).Webhook
	w.Path = ""
	opts, err := ingressOptions(w)
	if err != nil {
		t.Fatal(err)
	}
	checkMapped(t, opts, map[string]string{"Sources[0].NotConfigured": "nil while the configuration can serve the source (set on a mistake)", "Clock": "nil: the wall clock (a test's clock)"})
	w = filledConfig(t).Webhook
	w.Sources = nil
	if opts, err = ingressOptions(w); err != nil {
		t.Fatal(err)
	}
	checkMapped(t, opts, map[string]string{
		"Sources[0].Signature":     "the flat source authenticates by token only",
		"Sources[0].RedactFields":  "the flat source has no redact_fields key",
		"Sources[0].NotConfigured": "nil while the configuration can serve the source (set on a mistake)",
		"Clock":                    "nil: the wall clock (a test's clock)",
	})
}

func TestConsumerOptionsMapEveryField(t *testing.T) {
	checkMapped(t, consumerOptions(filledConfig(t), nil, nil, nil), map[string]string{
		"Logger":     "the caller's (consume_events.go), like the DB pool",
		"Registerer": "the caller's",
		"Reconnect":  "not configurable: 0 is the consumer's default",
		"MaxHold":    "not configurable: 0 is the consumer's default",
		"Clock":      "nil: the wall clock (a test's clock)",
	})
}
