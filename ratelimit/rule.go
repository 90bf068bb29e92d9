package ratelimit

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/keyspace"
)

// Default PT-BR messages per scope, used when a rule sets no message.
// {retry_after} is replaced by the whole seconds of Retry-After.
var defaultMessages = map[string]string{
	"ip":     "Muitas requisições deste endereço. Tente novamente em {retry_after} segundos.",
	"user":   "Você fez muitas requisições. Tente novamente em {retry_after} segundos.",
	"escola": "Sua escola atingiu o limite de requisições. Tente novamente em {retry_after} segundos.",
	"route":  "Este serviço recebeu muitas requisições. Tente novamente em {retry_after} segundos.",
}

// alignedWindowExtra is how long a clock-aligned key outlives its window
// (docs/rate-limiting.md, "Keys": a 1-minute window's key has TTL 2 min).
const alignedWindowExtra = time.Minute

// rule is a configs.Rule compiled for the request path.
type rule struct {
	name         string
	scope        string
	algorithm    Algorithm
	limit        int64
	observeLimit int64
	window       time.Duration
	observe      bool // mode observe (mode off never compiles)
	// aligned: user and escola rules whose window is whole minutes use
	// clock-aligned keys {prefix}rl:{rule}:{subject}:{YYYYMMDDHHMM}.
	aligned  bool
	message  string
	routes   []string // the rule's own routes list ("*" for all)
	outcomes [outcomeCount]prometheus.Counter
}

// ruleset is the immutable set of rules a Limiter decides with; Reload
// swaps it whole.
type ruleset struct {
	rules    []*rule
	byRoute  map[string][]*rule
	wildcard []*rule // rules with routes ["*"], for routes not configured
	local    bool    // on_store_error: local
}

func (rs *ruleset) forRoute(route string) []*rule {
	if r, ok := rs.byRoute[route]; ok {
		return r
	}
	return rs.wildcard
}

// compile validates cfg against routes and builds the ruleset.
func compile(cfg configs.RateLimits, routes []configs.Route, m *metrics) (*ruleset, error) {
	cfg.Rules = slices.Clone(cfg.Rules)
	if err := configs.ValidateRateLimits(&cfg, routes); err != nil {
		return nil, err
	}
	rs := &ruleset{byRoute: map[string][]*rule{}, local: cfg.OnStoreError == "local"}
	for _, c := range cfg.Rules {
		if c.Mode == "off" {
			continue
		}
		r := &rule{
			name:         c.Name,
			scope:        c.Scope,
			algorithm:    FixedWindow,
			limit:        c.Limit,
			observeLimit: c.ObserveLimit,
			window:       c.Window.D(),
			observe:      c.Mode == "observe",
			message:      c.Message,
			routes:       c.Routes,
		}
		switch c.Algorithm {
		case "gcra":
			r.algorithm = GCRA
		case "sliding_window":
			r.algorithm = SlidingWindow
		}
		r.aligned = r.algorithm == FixedWindow && (r.scope == "user" || r.scope == "escola") &&
			r.window%time.Minute == 0
		if r.message == "" {
			r.message = defaultMessages[r.scope]
		}
		for o := range outcomeCount {
			r.outcomes[o] = m.decisions.WithLabelValues(r.name, string(outcomeNames[o]))
		}
		rs.rules = append(rs.rules, r)
		if slices.Contains(c.Routes, "*") {
			rs.wildcard = append(rs.wildcard, r)
		}
	}
	for _, rt := range routes {
		var list []*rule
		for _, r := range rs.rules {
			if slices.Contains(r.routes, "*") || slices.Contains(r.routes, rt.Name) || slices.Contains(rt.RateLimits, r.name) {
				list = append(list, r)
			}
		}
		rs.byRoute[rt.Name] = list
	}
	return rs, nil
}

// subject returns what r counts for s ("" when s lacks it: no identity).
func (r *rule) subject(s Subject) string {
	switch r.scope {
	case "ip":
		return s.IP
	case "user":
		return s.User
	case "escola":
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
		return Hit{Key: ks.RateLimit(r.name, subject), Algorithm: r.algorithm, Limit: limit, Period: r.window}, 0
	}
	now := storeNow
	if r.aligned {
		start := now.Truncate(r.window)
		return Hit{
			Key:       ks.RateLimitAt(r.name, subject, start),
			Algorithm: FixedWindow,
			TTL:       r.window + alignedWindowExtra,
		}, start.Add(r.window).Sub(now)
	}
	return Hit{Key: ks.RateLimit(r.name, subject), Algorithm: FixedWindow, TTL: r.window}, 0
}
