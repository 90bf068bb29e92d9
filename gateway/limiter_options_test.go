package gateway

import (
	"slices"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/ratelimit"
)

// testLimiterOptions maps a parsed file's rate_limits as cmd/borda does
// (options_ratelimit.go), for the tests that run the real Limiter.
func testLimiterOptions(cfg configs.Config) ratelimit.Options {
	scopes := map[string]ratelimit.Scope{"ip": ratelimit.ScopeIP, "user": ratelimit.ScopeUser, "escola": ratelimit.ScopeEscola, "route": ratelimit.ScopeRoute}
	algorithms := map[string]ratelimit.Algorithm{"fixed_window": ratelimit.FixedWindow, "gcra": ratelimit.GCRA, "sliding_window": ratelimit.SlidingWindow}
	modes := map[string]ratelimit.Mode{"enforce": ratelimit.Enforce, "observe": ratelimit.Observe, "off": ratelimit.Off}
	rl := cfg.RateLimits
	o := ratelimit.Options{Timeout: rl.Timeout.D(), BreakerFailures: rl.Breaker.Failures, BreakerOpenFor: rl.Breaker.OpenFor.D(), RelaxPoll: rl.RelaxPoll.D(), DenyCacheSize: rl.DenyCacheSize}
	o.OnStoreError = map[string]ratelimit.Fallback{"allow": ratelimit.FailOpen, "local": ratelimit.LocalIP}[rl.OnStoreError] // else LocalWhileOpen
	for _, c := range rl.Rules {
		r := ratelimit.Rule{Name: c.Name, Scope: scopes[c.Scope], Algorithm: algorithms[c.Algorithm], Mode: modes[c.Mode],
			Limit: c.Limit, ObserveLimit: c.ObserveLimit, Window: c.Window.D(), Routes: slices.Clone(c.Routes), Message: c.Message}
		for _, rt := range cfg.Routes {
			if slices.Contains(rt.RateLimits, c.Name) {
				r.Routes = append(r.Routes, rt.Name)
			}
		}
		o.Rules = append(o.Rules, r)
	}
	return o
}
