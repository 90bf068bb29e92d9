package main

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/gateway"
	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/ratelimit"
)

// limiterOptions maps the validated rate_limits section to the
// limiter's options (docs/rate-limiting.md).
func limiterOptions(cfg configs.Config) ratelimit.Options {
	rl := cfg.RateLimits
	o := ratelimit.Options{
		Rules:           limiterRules(cfg),
		Timeout:         rl.Timeout.D(),
		BreakerFailures: rl.Breaker.Failures,
		BreakerOpenFor:  rl.Breaker.OpenFor.D(),
		RelaxPoll:       rl.RelaxPoll.D(),
		DenyCacheSize:   rl.DenyCacheSize,
		Sync:            rl.Sync.D(),
		OnStoreError:    storeFallbacks[rl.OnStoreError],
	}
	return o
}

// limiterRules maps rate_limits.rules; a rule's Routes are its own routes
// list plus every route that names it in routes[].rate_limits. configs has
// validated every name, so an unknown word cannot reach here.
func limiterRules(cfg configs.Config) []ratelimit.Rule {
	rules := make([]ratelimit.Rule, 0, len(cfg.RateLimits.Rules))
	for _, c := range cfg.RateLimits.Rules {
		r := ratelimit.Rule{
			Name:         c.Name,
			Scope:        ruleScopes[c.Scope],
			Algorithm:    ruleAlgorithms[c.Algorithm],
			Mode:         ruleModes[c.Mode],
			Limit:        c.Limit,
			ObserveLimit: c.ObserveLimit,
			Window:       c.Window.D(),
			Routes:       slices.Clone(c.Routes),
			Message:      c.Message,
		}
		for _, rt := range cfg.Routes {
			if slices.Contains(rt.RateLimits, c.Name) && !slices.Contains(r.Routes, rt.Name) {
				r.Routes = append(r.Routes, rt.Name)
			}
		}
		rules = append(rules, r)
	}
	return rules
}

var (
	ruleScopes = map[string]ratelimit.Scope{
		"ip": ratelimit.ScopeIP, "user": ratelimit.ScopeUser, "escola": ratelimit.ScopeEscola, "route": ratelimit.ScopeRoute,
	}
	ruleAlgorithms = map[string]ratelimit.Algorithm{
		"": ratelimit.FixedWindow, "fixed_window": ratelimit.FixedWindow, "gcra": ratelimit.GCRA, "sliding_window": ratelimit.SlidingWindow,
	}
	ruleModes = map[string]ratelimit.Mode{
		"": ratelimit.Enforce, "enforce": ratelimit.Enforce, "observe": ratelimit.Observe, "off": ratelimit.Off,
	}
	storeFallbacks = map[string]ratelimit.Fallback{
		"": ratelimit.LocalWhileOpen, "local_while_open": ratelimit.LocalWhileOpen, "allow": ratelimit.FailOpen, "local": ratelimit.LocalIP,
	}
)

// storeOptions maps the redis section to the rate-limit store's options:
// rdb is the shared client when the store is Redis.
func storeOptions(cfg configs.Config, rdb redis.UniversalClient, httpClient *http.Client) (ratelimit.StoreOptions, error) {
	o := ratelimit.StoreOptions{Redis: rdb, HTTPClient: httpClient}
	switch kind := cfg.StoreKind(); kind {
	case "redis":
		o.Kind = ratelimit.StoreRedis
	case "upstash-rest":
		o.Kind = ratelimit.StoreREST
		o.RESTURL, o.RESTToken = cfg.Redis.RestURL, cfg.Redis.RestToken.Reveal()
	case "memory":
		o.Kind = ratelimit.StoreMemory
	default:
		return o, fmt.Errorf("creating the rate-limit store: unknown store kind %q", kind)
	}
	return o, nil
}

// newStore builds the rate-limit store of cfg (rdb: the shared client of
// the Redis store).
func newStore(cfg configs.Config, rdb redis.UniversalClient, httpClient *http.Client) (ratelimit.Store, error) {
	o, err := storeOptions(cfg, rdb, httpClient)
	if err != nil {
		return nil, err
	}
	return ratelimit.NewStore(o)
}

// The gateway and the lifecycle rely on these shapes.
var (
	_ gateway.Limiter   = (*ratelimit.Limiter)(nil)
	_ startstop.Service = (*ratelimit.Limiter)(nil)
)
