package configs

import (
	"fmt"
	"strings"
	"time"
)

// RateLimits configures the limiter (docs/rate-limiting.md).
type RateLimits struct {
	// Timeout is the hard deadline of one store decision on the request
	// path (default 30ms); passing it fails open.
	Timeout Duration `yaml:"timeout"`
	// OnStoreError is what decides when the store does not.
	// "local_while_open" (default): a call that fails or passes the
	// timeout lets its request through, and while the breaker is open
	// every rule keeps an in-process per-instance limit (its own limit, on
	// each instance). "allow": every failure fails open, the open breaker
	// too (no limit until the store answers). "local": every failure,
	// a single one too, is decided on the per-instance limits.
	OnStoreError string `yaml:"on_store_error"`
	// Breaker stops calling a failing store.
	Breaker Breaker `yaml:"breaker"`
	// RelaxPoll is how often each instance reads relax factors
	// ({prefix}cfg:relax:{rule}) from the store (default 5s).
	RelaxPoll Duration `yaml:"relax_poll"`
	// DenyCacheSize is how many keys over their limit each instance
	// remembers, so their requests are refused without a store call
	// (default 65536, from 1024 to 4194304; about 150 bytes each: 10 MB
	// at the default). Past it the cache keeps the keys refused most often
	// and lets the others go to the store (docs/rate-limiting.md, "Failure
	// behaviour", local deny cache). Not reloaded.
	DenyCacheSize int `yaml:"deny_cache_size"`
	// Sync, when set (50ms is a good value), takes the store off the
	// request path: each replica decides on its own counts plus the other
	// replicas' counts as last read, and every Sync sends what it counted,
	// for all keys, in one round trip that reads the totals back. 0 (the
	// default): one store round trip per request, exact across replicas.
	// A single replica decides exactly as with 0; N replicas each spend a
	// lease, their share of what the store leaves, and ask the store past
	// it: a fixed window holds its limit + 5 in every window, sliding
	// window and GCRA from their second window (docs/rate-limiting.md,
	// "Synchronization", "Quota leasing"). At most 10s, and below every
	// rule's window.
	Sync Duration `yaml:"sync"`
	// Rules are evaluated together, in one store round trip per request
	// (or, with Sync, on the replica's own counts).
	Rules []Rule `yaml:"rules"`
}

// Breaker is a circuit breaker setting (internal/breaker: sony/gobreaker semantics).
type Breaker struct {
	// Failures is the number of consecutive failures that opens it.
	Failures int `yaml:"failures"`
	// OpenFor is how long it stays open before one probe is let through
	// (defaults: rate_limits 2s, forward 30s).
	OpenFor Duration `yaml:"open_for"`
}

// Rule is one rate-limit rule.
type Rule struct {
	// Name identifies the rule in keys, headers and metrics (letters,
	// digits, '-', '_'). The seed's names: burst (ip), api (user), escola.
	Name string `yaml:"name"`
	// Scope is what is counted: ip, user (usuario_id), escola (escola_id)
	// or route.
	Scope string `yaml:"scope"`
	// Algorithm is fixed_window (default; INCR with the TTL set on the first
	// increment; up to 2 × limit pass across a window edge), gcra (a
	// leaky bucket, burst = limit) or sliding_window (the weighted
	// two-window counter: any interval of d passes at most
	// limit × (1 + d/window), see docs/rate-limiting.md).
	Algorithm string `yaml:"algorithm"`
	// Limit is the number of requests allowed per Window (> 0; for gcra at
	// most MaxGCRAPerMillisecond per millisecond of Window).
	Limit int64 `yaml:"limit"`
	// Window is the period Limit applies to (≥ 1s, whole seconds).
	Window Duration `yaml:"window"`
	// Mode is enforce (default; 429 over the limit), observe (the request
	// passes, marked X-RateLimit-Would-Block) or off.
	Mode string `yaml:"mode"`
	// ObserveLimit, when > 0 and below Limit, is a tighter limit tried in
	// observe mode while Limit keeps enforcing.
	ObserveLimit int64 `yaml:"observe_limit"`
	// Routes lists the routes the rule applies to ("*" for all), besides
	// routes that name the rule in their own rate_limits.
	Routes []string `yaml:"routes"`
	// Message is the PT-BR detail of the 429; "{retry_after}" is replaced
	// by the seconds to wait. Empty: the scope's default message.
	Message string `yaml:"message"`
}

// Rate-limit vocabularies.
var (
	RuleScopes     = []string{"ip", "user", "escola", "route"}
	RuleAlgorithms = []string{"fixed_window", "gcra", "sliding_window"}
	RuleModes      = []string{"enforce", "observe", "off"}
	// StoreErrorFallbacks are the values of rate_limits.on_store_error.
	StoreErrorFallbacks = []string{"local_while_open", "allow", "local"}
)

func defaultRateLimits() RateLimits {
	return RateLimits{
		Timeout:       Duration(30e6),
		OnStoreError:  "local_while_open",
		Breaker:       Breaker{Failures: 5, OpenFor: Duration(2e9)},
		RelaxPoll:     Duration(5e9),
		DenyCacheSize: 1 << 16,
	}
}

// validateRateLimits checks the rate_limits section: the store settings
// (timeout, fallback, breaker, relax poll, sync), each rule
// (validateRule), then that every rule a route names exists and every
// route a rule names does.
func (c *Config) validateRateLimits(p *problems) {
	rl := &c.RateLimits
	validateStoreSettings(p, rl)
	names := map[string]bool{}
	for i := range rl.Rules {
		r := &rl.Rules[i]
		f := fmt.Sprintf("rate_limits.rules[%d]", i)
		checkName(p, f+".name", r.Name, names, "is used by another rule")
		validateRule(p, f, r)
	}
	c.validateRuleRoutes(p, names)
}

// validateStoreSettings checks how rate_limits reaches its store.
func validateStoreSettings(p *problems, rl *RateLimits) {
	if rl.Timeout <= 0 {
		p.addf("rate_limits.timeout", "must be positive")
	}
	if !oneOf(rl.OnStoreError, StoreErrorFallbacks) {
		p.addf("rate_limits.on_store_error", "%q: want one of %s", rl.OnStoreError, strings.Join(StoreErrorFallbacks, ", "))
	}
	if rl.Breaker.Failures < 1 {
		p.addf("rate_limits.breaker.failures", "must be at least 1")
	}
	if rl.Breaker.OpenFor <= 0 {
		p.addf("rate_limits.breaker.open_for", "must be positive")
	}
	if rl.RelaxPoll <= 0 {
		p.addf("rate_limits.relax_poll", "must be positive")
	}
	if rl.DenyCacheSize < 1<<10 || rl.DenyCacheSize > 1<<22 {
		p.addf("rate_limits.deny_cache_size", "%d: want 1024 to 4194304 keys", rl.DenyCacheSize)
	}
	if rl.Sync < 0 || rl.Sync.D() > 10*time.Second {
		p.addf("rate_limits.sync", "%s: want 0 (a store round trip per request) or an interval up to 10s", rl.Sync)
	}
	for i, r := range rl.Rules {
		if rl.Sync > 0 && r.Window > 0 && rl.Sync >= r.Window {
			p.addf("rate_limits.sync", "%s is not below the window of rate_limits.rules[%d] (%s)", rl.Sync, i, r.Window)
			break
		}
	}
}

// validateRule checks one rule (f is its path) past its name, filling
// its algorithm (fixed_window) and mode (enforce) when absent.
func validateRule(p *problems, f string, r *Rule) {
	if r.Algorithm == "" {
		r.Algorithm = "fixed_window"
	}
	if r.Mode == "" {
		r.Mode = "enforce"
	}
	if !oneOf(r.Scope, RuleScopes) {
		p.addf(f+".scope", "%q: want one of %s", r.Scope, strings.Join(RuleScopes, ", "))
	}
	if !oneOf(r.Algorithm, RuleAlgorithms) {
		p.addf(f+".algorithm", "%q: want one of %s", r.Algorithm, strings.Join(RuleAlgorithms, ", "))
	}
	if !oneOf(r.Mode, RuleModes) {
		p.addf(f+".mode", "%q: want one of %s", r.Mode, strings.Join(RuleModes, ", "))
	}
	if r.Limit <= 0 {
		p.addf(f+".limit", "must be positive")
	}
	if r.ObserveLimit < 0 || (r.ObserveLimit > 0 && r.ObserveLimit >= r.Limit) {
		p.addf(f+".observe_limit", "must be below limit (%d)", r.Limit)
	}
	if r.ObserveLimit > 0 && (r.Algorithm == "gcra" || r.Algorithm == "sliding_window") {
		p.addf(f+".observe_limit", "is supported with fixed_window only (a %s rule counts only the hits it lets pass, so it has one limit)", r.Algorithm)
	}
	if r.Window.D().Seconds() < 1 || r.Window.D()%1e9 != 0 {
		p.addf(f+".window", "%s: must be whole seconds, at least 1s", r.Window)
	}
	if r.Algorithm == "gcra" && r.Limit > MaxGCRAPerMillisecond*r.Window.D().Milliseconds() {
		p.addf(f+".limit", "%d per %s: a gcra rule allows at most %d a second (its emission interval, window / limit, "+
			"at least 0.1 ms: the store keeps the arrival time to the thousandth of a millisecond, so a shorter one is not counted); "+
			"use sliding_window for a higher rate", r.Limit, r.Window, MaxGCRAPerMillisecond*1000)
	}
}

// MaxGCRAPerMillisecond is the most a gcra rule's limit allows per
// millisecond of its window: 10, an emission interval of 0.1 ms. The
// stores keep a GCRA arrival time to the thousandth of a millisecond, so
// an interval below 0.0005 ms rounds away and the rule counts nothing
// (fresh attack pass 25 R06: a limit of 3 000 000 a second never
// advanced on Redis), and one of 0.1 ms is counted to within 0.5 %
// (docs/rate-limiting.md, "GCRA arithmetic").
const MaxGCRAPerMillisecond = 10

// validateRuleRoutes checks the names between rules and routes: each of a
// route's rate_limits is a rule (names), each of a rule's routes a route.
func (c *Config) validateRuleRoutes(p *problems, names map[string]bool) {
	routes := map[string]bool{}
	for _, rt := range c.Routes {
		routes[rt.Name] = true
		for j, name := range rt.RateLimits {
			if !names[name] {
				p.addf(fmt.Sprintf("routes[%s].rate_limits[%d]", rt.Name, j), "%q is not a rule in rate_limits.rules", name)
			}
		}
	}
	for i, r := range c.RateLimits.Rules {
		for j, rt := range r.Routes {
			if rt != "*" && !routes[rt] {
				p.addf(fmt.Sprintf("rate_limits.rules[%d].routes[%d]", i, j), "%q is not a route name", rt)
			}
		}
	}
}

func oneOf(s string, set []string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}
