package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/olp-edu/borda/internal/breaker"

	"github.com/olp-edu/borda/keyspace"
)

// relaxState maps rule names to their active relax factor.
type relaxState map[string]relaxEntry

type relaxEntry struct {
	factor float64
	until  time.Time
}

// maxRelaxedLimit caps a relaxed limit: 2^53 is exact in float64 (the Lua
// script's numbers) and far above any real traffic, so a huge factor
// ("--factor 1e20") lifts the limit instead of overflowing int64.
const maxRelaxedLimit = 1 << 53

// apply returns limit raised by rule's relax factor (floor(limit × factor),
// at most maxRelaxedLimit) while the relax lasts; limit itself otherwise,
// and for limit 0.
func (s *relaxState) apply(rule string, limit int64, now time.Time) int64 {
	if s == nil || limit == 0 {
		return limit
	}
	e, ok := (*s)[rule]
	if !ok || !now.Before(e.until) {
		return limit
	}
	relaxed := math.Floor(float64(limit) * e.factor)
	if relaxed >= maxRelaxedLimit {
		return max(limit, maxRelaxedLimit)
	}
	return max(limit, int64(relaxed))
}

// ErrBadRelax is returned by Relax for a factor below 1 or a non-positive
// duration.
var ErrBadRelax = errors.New("ratelimit: relax factor must be in [1, 100] and duration in (0, 24h]")

// MaxRelax bounds how long one relax may last.
const MaxRelax = 24 * time.Hour

// MaxRelaxFactor is the largest relax factor: a relax raises a limit during
// an incident, it never turns a rule off (factor 1e308 would).
const MaxRelaxFactor = 100

// Relax writes {prefix}cfg:relax:{rule} = factor with TTL d, which every
// running Limiter on the same store applies within rate_limits.relax_poll
// and drops when it expires. A relax only raises limits: factor must be
// in [1, MaxRelaxFactor] (ErrBadRelax otherwise); d must be in (0, MaxRelax].
func Relax(ctx context.Context, store Store, ks keyspace.Keyspace, rule string, factor float64, d time.Duration) error {
	if math.IsNaN(factor) || factor < 1 || factor > MaxRelaxFactor || d <= 0 || d > MaxRelax {
		return ErrBadRelax
	}
	return store.WriteRelax(ctx, ks.Relax(rule), factor, d)
}

// RefreshRelax reads the relax factors now instead of at the next
// relax_poll, so a relax written by this process (the operator page) is in
// force here at once; other instances apply it within their poll. Safe
// beside the poller; a store error keeps the factors in force.
func (l *Limiter) RefreshRelax(ctx context.Context) { l.pollRelax(ctx) }

// pollRelax reads every rule's relax key in one round trip and swaps the
// active factors. On a store error the current factors stay until their
// own expiry.
func (l *Limiter) pollRelax(ctx context.Context) {
	if !l.memory && l.breaker.State() != breaker.StateClosed {
		return
	}
	rs := l.rules.Load()
	if len(rs.rules) == 0 {
		return
	}
	keys := make([]string, len(rs.rules))
	for i, r := range rs.rules {
		keys[i] = l.ks.Relax(r.name)
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	vals, err := l.store.ReadRelax(pctx, keys)
	if !l.memory {
		l.m.relaxCommands.Inc()
	}
	if err != nil {
		l.log.Warn("reading relax factors", "err", err)
		return
	}
	now := l.now()
	next := relaxState{}
	for i, v := range vals {
		name := rs.rules[i].name
		switch {
		case v.Factor == 0:
		case math.IsNaN(v.Factor) || v.Factor < 1 || v.Factor > MaxRelaxFactor:
			// Written by hand or by another tool: Relax refuses it, and so
			// does every reader (a relax never turns a rule off).
			l.log.Warn("ignoring a relax factor outside [1, 100]", "rule", name, "factor", v.Factor)
		case v.TTL > MaxRelax+time.Minute:
			// The same for its length (fresh attack pass A026: a key with
			// a 10-year TTL relaxed the rule for ten years). A minute of
			// slack for the store's clock.
			l.log.Warn("ignoring a relax longer than 24h", "rule", name, "factor", v.Factor, "ttl", v.TTL.String())
		default:
			next[name] = relaxEntry{factor: v.Factor, until: now.Add(v.TTL)}
		}
	}
	prev := l.relax.Load()
	if prev == nil && len(next) == 0 {
		return
	}
	if prev == nil || !maps.EqualFunc(*prev, next, func(a, b relaxEntry) bool { return a.factor == b.factor }) {
		l.deny.purge()
		for name, e := range next {
			l.log.Info("relax active", "rule", name, "factor", e.factor, "until", e.until.UTC().Format(time.RFC3339))
		}
	}
	l.relax.Store(&next)
}

// ReadRelaxes returns the active relax of each rule name (Factor 0: none),
// for `borda limits show`.
func ReadRelaxes(ctx context.Context, store Store, ks keyspace.Keyspace, rules []string) ([]RelaxValue, error) {
	keys := make([]string, len(rules))
	for i, r := range rules {
		keys[i] = ks.Relax(r)
	}
	vals, err := store.ReadRelax(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("reading relax factors: %w", err)
	}
	return vals, nil
}
