package ratelimit

import (
	"fmt"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

// Scope is what a rule counts: the client IP, the verified user, the
// verified school (escola) or the route itself.
type Scope uint8

// Scopes.
const (
	ScopeIP Scope = iota + 1
	ScopeUser
	ScopeEscola
	ScopeRoute
)

// String returns the scope's configuration name (ip, user, escola,
// route), as the 429 body, metrics and logs spell it.
func (s Scope) String() string {
	switch s {
	case ScopeIP:
		return "ip"
	case ScopeUser:
		return "user"
	case ScopeEscola:
		return "escola"
	case ScopeRoute:
		return "route"
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// String returns the algorithm's configuration name (fixed_window, gcra,
// sliding_window).
func (a Algorithm) String() string {
	switch a {
	case FixedWindow:
		return "fixed_window"
	case GCRA:
		return "gcra"
	case SlidingWindow:
		return "sliding_window"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// Mode is what a rule does with a request over its limit.
type Mode uint8

// Modes.
const (
	// Enforce refuses the request with 429.
	Enforce Mode = iota + 1
	// Observe lets it pass, marked X-RateLimit-Would-Block.
	Observe
	// Off keeps the rule configured but never evaluates it.
	Off
)

// String returns the mode's configuration name (enforce, observe, off).
func (m Mode) String() string {
	switch m {
	case Enforce:
		return "enforce"
	case Observe:
		return "observe"
	case Off:
		return "off"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Fallback is what the Limiter decides when the store does not: a call
// that failed or passed the deadline, or the breaker open (the store not
// asked at all). docs/rate-limiting.md, "Failure behaviour".
type Fallback uint8

// Fallbacks (rate_limits.on_store_error).
const (
	// LocalWhileOpen (the zero value and the configuration's default,
	// local_while_open): a call that fails or passes its deadline lets its
	// request through (OutcomeError: design.md's fail-open on a Redis
	// fault), and while the breaker is open every rule (ip, user, escola,
	// route; each algorithm) is decided in process, per instance, on the
	// rule's own limit, so sustained load on the store cannot switch
	// limiting off.
	LocalWhileOpen Fallback = iota
	// FailOpen (allow) lets every pending rule pass (OutcomeError) on any
	// failure, the breaker open included: the behaviour before
	// LocalWhileOpen became the default.
	FailOpen
	// LocalIP (local) decides every rule in process, per instance, on any
	// failure: a single failed or late call too, not only while the breaker
	// is open (the name is historical: it once kept ip rules only).
	LocalIP
)

// String returns the fallback's configuration name (local_while_open,
// allow, local).
func (f Fallback) String() string {
	switch f {
	case LocalWhileOpen:
		return "local_while_open"
	case FailOpen:
		return "allow"
	case LocalIP:
		return "local"
	}
	return fmt.Sprintf("Fallback(%d)", uint8(f))
}

// decidesLocally reports whether a store failure is decided in process:
// breakerOpen says the store was not asked (the breaker refused the call).
func (f Fallback) decidesLocally(breakerOpen bool) bool {
	return f == LocalIP || (f == LocalWhileOpen && breakerOpen)
}

// AllRoutes in Rule.Routes applies the rule to every route, routes no
// other rule names and requests no route matched included.
const AllRoutes = "*"

// Rule is one rate-limit rule, already validated (configs validates the
// file and names each bad field; docs/rate-limiting.md describes them).
type Rule struct {
	// Name identifies the rule in keys, headers and metrics.
	Name string
	// Scope is what is counted.
	Scope Scope
	// Algorithm is how a key counts (zero: FixedWindow).
	Algorithm Algorithm
	// Mode is Enforce, Observe or Off (zero: Enforce).
	Mode Mode
	// Limit is the requests allowed per Window (> 0).
	Limit int64
	// ObserveLimit, when > 0, is a tighter FixedWindow limit tried in
	// observe mode while Limit keeps enforcing.
	ObserveLimit int64
	// Window is the period Limit applies to (whole seconds, ≥ 1s).
	Window time.Duration
	// Routes names every route the rule applies to (AllRoutes for all):
	// the rule's own routes list and the routes that name the rule.
	Routes []string
	// Message is the PT-BR detail of the 429 ("{retry_after}" is replaced
	// by the seconds to wait); empty: the scope's default.
	Message string
}

// Options configures a Limiter (New).
type Options struct {
	// Rules are evaluated together, in one store round trip per request,
	// in this order.
	Rules []Rule
	// Timeout is the hard deadline of one store decision; passing it fails
	// open. Must be positive (rate_limits.timeout).
	Timeout time.Duration
	// OnStoreError is what is decided when the store does not decide
	// (zero: LocalWhileOpen, the local limits while the breaker is open).
	OnStoreError Fallback
	// BreakerFailures consecutive store failures open the breaker (≥ 1;
	// 0 means 1).
	BreakerFailures int
	// BreakerOpenFor is how long the breaker stays open before a probe
	// (0 means 1ms).
	BreakerOpenFor time.Duration
	// RelaxPoll is how often relax factors are read from the store. Must
	// be positive (rate_limits.relax_poll).
	RelaxPoll time.Duration
	// DenyCacheSize is how many keys over their limit the local deny cache
	// holds (about 150 bytes each; deny.go); 0: no deny cache, every
	// refused key asks the store (rate_limits.deny_cache_size).
	DenyCacheSize int
	// Sync, when > 0, takes the store off the request path: the Limiter
	// decides on its own view of the counts and sends what it counted to
	// the store every Sync, for all keys in one round trip, reading the
	// other replicas' counts back (the store must be a Syncer). 0 decides
	// every request in its own store round trip (docs/rate-limiting.md,
	// "Synchronization").
	Sync time.Duration
	// Clock is the Limiter's clock (nil: the wall clock), and its store
	// breaker's. It times only what is local to the instance: the deny
	// cache, relax expiry, the local limits of on_store_error and the
	// breaker's open period. Counting happens on the store's clock (Redis
	// TIME in the script, the MemoryStore's own clock), and clock-aligned
	// key names follow the store's clock as the last reply showed it, so a
	// replica whose clock is off by seconds or minutes neither resets nor
	// splits anybody's count.
	Clock clock.Clock
}

// check refuses a typed value the Limiter cannot work with. The file's
// rules are validated by configs, field by field; this only guards a
// caller that builds Options by hand.
func (r Rule) check() error {
	switch {
	case r.Name == "":
		return fmt.Errorf("rate-limit rule without a name")
	case r.Scope < ScopeIP || r.Scope > ScopeRoute:
		return fmt.Errorf("rate-limit rule %q: unknown scope %v", r.Name, r.Scope)
	case r.Algorithm > SlidingWindow:
		return fmt.Errorf("rate-limit rule %q: unknown algorithm %v", r.Name, r.Algorithm)
	case r.Mode > Off:
		return fmt.Errorf("rate-limit rule %q: unknown mode %v", r.Name, r.Mode)
	case r.Limit <= 0:
		return fmt.Errorf("rate-limit rule %q: limit %d is not positive", r.Name, r.Limit)
	case r.Window < time.Second:
		return fmt.Errorf("rate-limit rule %q: window %s is under 1s", r.Name, r.Window)
	}
	return nil
}
