package ratelimit

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/keyspace"
)

// alignedWindowExtra is how long a clock-aligned key outlives its window
// (docs/rate-limiting.md, "Keys": a 1-minute window's key has TTL 2 min).
const alignedWindowExtra = time.Minute

// rule is a Rule compiled for the request path.
type rule struct {
	name         string
	scope        Scope
	algorithm    Algorithm
	limit        int64
	observeLimit int64
	window       time.Duration
	observe      bool // mode observe (mode off never compiles)
	// aligned: user and escola rules whose window is whole minutes use
	// clock-aligned keys {prefix}rl:{rule}:{subject}:{YYYYMMDDHHMM}.
	aligned  bool
	message  string
	routes   []string // the routes the rule applies to (AllRoutes for all)
	outcomes [outcomeCount]prometheus.Counter
	dist     *distribution // fixed_window rules: the distribution counters (dist.go)
}

// ruleset is the immutable set of rules a Limiter decides with; Reload
// swaps it whole.
type ruleset struct {
	rules    []*rule
	byRoute  map[string][]*rule
	wildcard []*rule // rules with routes ["*"], for routes no rule names
}

func (rs *ruleset) forRoute(route string) []*rule {
	if r, ok := rs.byRoute[route]; ok {
		return r
	}
	return rs.wildcard
}

// compile builds the ruleset of rules; an impossible typed value is
// refused (the file's rules were validated by configs).
func compile(rules []Rule, m *metrics) (*ruleset, error) {
	rs := &ruleset{byRoute: map[string][]*rule{}}
	var named []string // route names any rule lists, in order
	for _, c := range rules {
		if err := c.check(); err != nil {
			return nil, err
		}
		if c.Mode == Off {
			continue
		}
		r := &rule{
			name:         c.Name,
			scope:        c.Scope,
			algorithm:    c.Algorithm,
			limit:        c.Limit,
			observeLimit: c.ObserveLimit,
			window:       c.Window,
			observe:      c.Mode == Observe,
			message:      c.Message,
			routes:       slices.Clone(c.Routes),
		}
		if r.algorithm == 0 {
			r.algorithm = FixedWindow
		}
		r.aligned = r.algorithm == FixedWindow && (r.scope == ScopeUser || r.scope == ScopeEscola) &&
			r.window%time.Minute == 0
		if r.message == "" {
			r.message = defaultMessages[r.scope]
		}
		for o := range outcomeCount {
			r.outcomes[o] = m.decisions.WithLabelValues(r.name, string(outcomeNames[o]))
		}
		rs.rules = append(rs.rules, r)
		if slices.Contains(r.routes, AllRoutes) {
			rs.wildcard = append(rs.wildcard, r)
		}
		for _, rt := range r.routes {
			if rt != AllRoutes && !slices.Contains(named, rt) {
				named = append(named, rt)
			}
		}
	}
	for _, rt := range named {
		var list []*rule
		for _, r := range rs.rules {
			if slices.Contains(r.routes, AllRoutes) || slices.Contains(r.routes, rt) {
				list = append(list, r)
			}
		}
		rs.byRoute[rt] = list
	}
	return rs, nil
}

// subject returns what r counts for s ("" when s lacks it: no identity).
func (r *rule) subject(s Subject) string {
	switch r.scope {
	case ScopeIP:
		return s.IP
	case ScopeUser:
		return s.User
	case ScopeEscola:
		return s.Escola
	default:
		return s.Route
	}
}

// hit returns the store request of r for subject, and the time until its
// window resets when the window is clock-aligned (0 otherwise: the store
// says). storeNow is the Limiter's estimate of the store's clock (its own
// clock plus the offset the last reply showed): only clock-aligned key
// names need a time on this side.
func (r *rule) hit(ks keyspace.Keyspace, subject string, limit int64, storeNow time.Time) (Hit, time.Duration) {
	if r.algorithm == GCRA || r.algorithm == SlidingWindow {
		return Hit{Key: ks.RateLimit(r.name, subject), Algorithm: r.algorithm, Limit: limit, Period: r.window, Observe: r.observe}, 0
	}
	now := storeNow
	if r.aligned {
		start := now.Truncate(r.window)
		return Hit{
			Key:       ks.RateLimitAt(r.name, subject, start),
			Algorithm: FixedWindow,
			TTL:       r.window + alignedWindowExtra,
			Limit:     limit,
			Observe:   r.observe,
			dist:      r.dist,
		}, start.Add(r.window).Sub(now)
	}
	return Hit{Key: ks.RateLimit(r.name, subject), Algorithm: FixedWindow, TTL: r.window, Limit: limit, Observe: r.observe, dist: r.dist}, 0
}
