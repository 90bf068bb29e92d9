package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// An observed rule whose lease a synchronizing replica spent refuses no
// request. Its ask left the replica no lease, and the request was
// refused whole: every rule of it got a refusal, the enforcing ones
// blocked (a 429 from a rule with room) and the deny cache kept their
// keys. This was the rollout's phase 3 (user rules observed beside an
// enforced burst rule) on two or more replicas. Each algorithm, two
// replicas: the observed limit is passed (would-blocks), no request is
// refused, and the enforced rule's key is never kept refused.
func TestSync_AnObservedRuleOverItsLeaseRefusesNoRequest(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, GCRA, SlidingWindow} {
		t.Run(algName(alg), func(t *testing.T) {
			opts := rulesConfig(
				Rule{Name: "obs", Scope: ScopeIP, Algorithm: alg, Mode: Observe, Limit: 4, Window: 10 * time.Second, Routes: []string{AllRoutes}},
				Rule{Name: "burst", Scope: ScopeIP, Algorithm: GCRA, Limit: 1000, Window: 10 * time.Second, Routes: []string{AllRoutes}},
			)
			opts.Sync = 50 * time.Millisecond
			ks := keyspace.MustNew(servicetest.KeyPrefix(t))
			a := manualFleet(t, 2, opts, ks, newRegisteringMemory())[0]
			ip := "203.0.113.160"
			would, allowed := 0, 0
			for i := range 12 {
				v := a.Decide(context.Background(), Subject{Route: "portal", IP: ip})
				if v.Blocked() {
					t.Fatalf("request %d refused beside an observed rule: %+v", i, v.Decisions)
				}
				if v.WouldBlock() {
					would++
				}
				for _, d := range v.Decisions {
					if d.Rule == "obs" && d.Outcome == OutcomeAllow {
						allowed++
					}
				}
			}
			if would == 0 {
				t.Fatal("the observed rule never would-blocked: its lease was not spent, the test proves nothing")
			}
			// What the observed rule reports is what enforcing it would do:
			// never more allowed than its limit, the rest would-block.
			if allowed > 4 || allowed+would != 12 {
				t.Errorf("the observed rule of 4 allowed %d and would-blocked %d of 12 requests; want at most 4 allowed, the rest would-block", allowed, would)
			}
			if _, ok := a.deny.get(ks.RateLimit("burst", ip), time.Now()); ok {
				t.Error("the enforced rule's key is in the deny cache, yet it never refused")
			}
		})
	}
}

// A request a synchronizing replica refuses for want of one rule's lease
// reports the other rules as they are: one with room is not a refusal,
// and its key never enters the deny cache. Each of them got a refusal,
// and a route-wide rule's key, refused so, was kept refused for every
// client of the route on that replica (the attack passes' client under
// its limit refused beside a flood, its 429 naming the route rule).
func TestSync_ARequestRefusedByOneRuleReportsTheOthersWithRoom(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, GCRA, SlidingWindow} {
		t.Run(algName(alg), func(t *testing.T) {
			opts := rulesConfig(
				Rule{Name: "per_ip", Scope: ScopeIP, Algorithm: alg, Limit: 4, Window: 10 * time.Second, Routes: []string{AllRoutes}},
				Rule{Name: "route", Scope: ScopeRoute, Algorithm: FixedWindow, Limit: 1000, Window: 10 * time.Second, Routes: []string{AllRoutes}},
			)
			opts.Sync = 50 * time.Millisecond
			ks := keyspace.MustNew(servicetest.KeyPrefix(t))
			a := manualFleet(t, 2, opts, ks, newRegisteringMemory())[0]
			refused := 0
			for i := range 12 {
				v := a.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.161"})
				if !v.Blocked() {
					continue
				}
				refused++
				for _, d := range v.Decisions {
					if d.Rule == "route" && d.Outcome != OutcomeAllow {
						t.Fatalf("request %d: the route rule, with room, reported %s: %+v", i, d.Outcome, v.Decisions)
					}
				}
			}
			if refused == 0 {
				t.Fatal("no request was refused: the per-IP lease was not spent, the test proves nothing")
			}
			if _, ok := a.deny.get(ks.RateLimit("route", "portal"), time.Now()); ok {
				t.Error("the route rule's key is in the deny cache, yet it never refused")
			}
			if v := a.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.162"}); v.Blocked() {
				t.Errorf("another client of the route was refused: %+v", v.Decisions)
			}
		})
	}
}
