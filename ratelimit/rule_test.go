package ratelimit

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/keyspace"
)

// TestRuleKeys_NamesAndTTLsOfTheKeyspace pins the key names and TTLs of docs/rate-limiting.md, "Keys".
func TestRuleKeys_NamesAndTTLsOfTheKeyspace(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp:")
	now := time.Date(2026, 11, 30, 8, 50, 42, 0, time.UTC)
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	cfg := rulesConfig(
		burstRule(50, 5*time.Second),
		Rule{Name: "api", Scope: ScopeUser, Limit: 600, Window: time.Minute, Routes: []string{"*"}},
		Rule{Name: "escola", Scope: ScopeEscola, Limit: 6000, Window: 5 * time.Minute, Routes: []string{"*"}},
		Rule{Name: "fast", Scope: ScopeUser, Limit: 10, Window: 10 * time.Second, Routes: []string{"*"}},
		Rule{Name: "upload", Scope: ScopeRoute, Limit: 100, Window: time.Second, Routes: []string{"*"}},
		Rule{Name: "login", Scope: ScopeIP, Algorithm: GCRA, Limit: 10, Window: time.Minute, Routes: []string{"*"}},
	)
	rs, err := compile(cfg.Rules, m)
	if err != nil {
		t.Fatal(err)
	}
	s := Subject{Route: "portal", IP: "2001:db8:1:2::/64", User: "u-42", Escola: "e-7"}
	for i, tc := range []struct {
		key   string
		ttl   time.Duration
		reset time.Duration
	}{
		{"olp:rl:burst:2001:db8:1:2::/64", 5 * time.Second, 0},
		{"olp:rl:api:u-42:202611300850", 2 * time.Minute, 18 * time.Second},
		{"olp:rl:escola:e-7:202611300850", 6 * time.Minute, 4*time.Minute + 18*time.Second},
		{"olp:rl:fast:u-42", 10 * time.Second, 0},
		{"olp:rl:upload:portal", time.Second, 0},
		{"olp:rl:login:2001:db8:1:2::/64", 0, 0},
	} {
		r := rs.rules[i]
		h, reset := r.hit(ks, r.subject(s), r.limit, now)
		if h.Key != tc.key || h.TTL != tc.ttl || reset != tc.reset {
			t.Errorf("rule %s: key %q TTL %v reset %v; want %q %v %v", r.name, h.Key, h.TTL, reset, tc.key, tc.ttl, tc.reset)
		}
	}
	if rs.rules[5].algorithm != GCRA {
		t.Fatal("login is not GCRA")
	}
}
