package main

import (
	"slices"
	"testing"
	"time"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/ratelimit"
)

// Every word configs accepts maps to a typed value, each to its own, and
// the typed value prints as the word (metrics, logs and the 429 body
// spell it so).
func TestEveryConfiguredWordMapsToItsTypedValue(t *testing.T) {
	for _, w := range configs.RuleScopes {
		if s, ok := ruleScopes[w]; !ok || s.String() != w {
			t.Errorf("scope %q maps to %v", w, s)
		}
	}
	for _, w := range configs.RuleAlgorithms {
		if a, ok := ruleAlgorithms[w]; !ok || a.String() != w {
			t.Errorf("algorithm %q maps to %v", w, a)
		}
	}
	for _, w := range configs.RuleModes {
		if m, ok := ruleModes[w]; !ok || m.String() != w {
			t.Errorf("mode %q maps to %v", w, m)
		}
	}
	for _, w := range configs.StoreErrorFallbacks {
		if f, ok := storeFallbacks[w]; !ok || f.String() != w {
			t.Errorf("on_store_error %q maps to %v", w, f)
		}
	}
}

// A file without on_store_error gets the local limits while the breaker
// is open (issue 27 item 3), the Limiter's zero value too.
func TestLimiterOptionsDefaultOnStoreErrorIsLocalWhileOpen(t *testing.T) {
	cfg, err := configs.Parse([]byte("environment: development\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RateLimits.OnStoreError != "local_while_open" || limiterOptions(cfg).OnStoreError != ratelimit.LocalWhileOpen {
		t.Errorf("default on_store_error %q maps to %v, want local_while_open", cfg.RateLimits.OnStoreError, limiterOptions(cfg).OnStoreError)
	}
}

// A route's rate_limits list reaches the rule as one of its Routes; the
// settings keep their values.
func TestLimiterOptionsFoldRouteRateLimitsIntoTheRule(t *testing.T) {
	cfg, err := configs.Parse([]byte(`environment: development
routes:
  - {name: portal, path_prefix: /, upstream: "http://127.0.0.1:1", rate_limits: [burst]}
  - {name: api, path_prefix: /api, upstream: "http://127.0.0.1:1"}
rate_limits:
  timeout: 40ms
  on_store_error: local
  sync: 50ms
  rules:
    - {name: burst, scope: ip, limit: 5, window: 5s}
    - {name: api, scope: user, algorithm: gcra, mode: observe, limit: 600, window: 1m, routes: ['*']}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	o := limiterOptions(cfg)
	if o.Timeout != 40*time.Millisecond || o.OnStoreError != ratelimit.LocalIP || o.BreakerFailures != 5 || o.RelaxPoll != 5*time.Second || o.Sync != 50*time.Millisecond {
		t.Errorf("settings: %+v", o)
	}
	if len(o.Rules) != 2 || !slices.Equal(o.Rules[0].Routes, []string{"portal"}) || o.Rules[0].Mode != ratelimit.Enforce || o.Rules[0].Algorithm != ratelimit.FixedWindow {
		t.Errorf("burst: %+v", o.Rules[0])
	}
	if r := o.Rules[1]; r.Scope != ratelimit.ScopeUser || r.Algorithm != ratelimit.GCRA || r.Mode != ratelimit.Observe || r.Window != time.Minute || !slices.Equal(r.Routes, []string{"*"}) {
		t.Errorf("api: %+v", r)
	}
}

// The config check's bound on a gcra rule and the limiter's bound on a
// relaxed one are the same number, written once in each package (configs
// imports no domain package).
func TestGCRABoundIsTheSameInConfigsAndTheLimiter(t *testing.T) {
	if configs.MaxGCRAPerMillisecond != ratelimit.MaxGCRAPerMillisecond {
		t.Errorf("configs.MaxGCRAPerMillisecond %d, ratelimit.MaxGCRAPerMillisecond %d: one bound", configs.MaxGCRAPerMillisecond, ratelimit.MaxGCRAPerMillisecond)
	}
}
