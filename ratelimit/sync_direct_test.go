package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// Fresh attack pass 7 R02/R03: with rate_limits.sync and two replicas, a
// rule of 1 per window passed 2 of a concurrent burst, and again after
// every wait longer than the window (each replica leased itself 1 while
// anything remained). A rule whose limit is below the replicas is decided
// by the store's round trip: every algorithm passes exactly its limit of
// each burst over two and three replicas, window after window, and a
// rule at or above the replicas beside it is still decided locally.
func TestSync_LimitBelowTheReplicasIsExactInEveryWindow(t *testing.T) {
	t.Parallel()
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("%v/%d replicas", alg, n), func(t *testing.T) {
				t.Parallel()
				prefix := servicetest.KeyPrefix(t)
				rdb := testRedis(t, prefix)
				ks := keyspace.MustNew(prefix)
				rule := burstRule(1, time.Second)
				rule.Algorithm = alg
				ls := startedReplicas(t, n, rule, ks, func() Store { return NewRedisStore(rdb) })
				for burst := range 3 {
					// A burst in which a store round trip timed out (a
					// loaded machine) failed open by design: it proves
					// nothing either way, so it is tried again on a new key.
					var passed int64
					for try := 0; ; try++ {
						ip := fmt.Sprintf("203.0.113.%d", 100+10*try+burst) // a new key each burst: a key's first window each time
						var failedOpen bool
						passed, failedOpen = concurrentBurst(ls, ip, 10)
						if !failedOpen {
							break
						}
						if try == 4 {
							t.Fatalf("burst %d: a store round trip timed out in each of 5 tries", burst)
						}
					}
					if passed != 1 {
						t.Errorf("burst %d: %d of 10 passed a limit of 1 over %d replicas, want 1", burst, passed, n)
					}
				}
				// The same key after its window: exactly 1 again.
				ip := "203.0.113.100"
				deadline := time.Now().Add(5 * time.Second)
				for !allowedOnce(ls[0], ip) {
					if time.Now().After(deadline) {
						t.Fatalf("the key's window never ended")
					}
					time.Sleep(20 * time.Millisecond)
				}
				for i := 1; i < 10; i++ {
					if !ls[i%n].Decide(context.Background(), Subject{Route: "portal", IP: ip}).Blocked() {
						t.Errorf("request %d of the next window passed: the first took its only place", i)
					}
				}
			})
		}
	}
}

// concurrentBurst sends k concurrent requests of ip spread over the
// replicas ls; it reports how many passed and whether any failed open
// (OutcomeError: the store did not answer within the timeout).
func concurrentBurst(ls []*Limiter, ip string, k int) (passed int64, failedOpen bool) {
	var n, errs atomic.Int64
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() {
			v := ls[i%len(ls)].Decide(context.Background(), Subject{Route: "portal", IP: ip})
			for _, d := range v.Decisions {
				if d.Outcome == OutcomeError {
					errs.Add(1)
				}
			}
			if !v.Blocked() {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), errs.Load() > 0
}

// allowedOnce reports whether one request of ip passes on l.
func allowedOnce(l *Limiter, ip string) bool {
	return !l.Decide(context.Background(), Subject{Route: "portal", IP: ip}).Blocked()
}

// Only a limit below the replicas is decided by the store's round trip:
// at the replicas' count each replica has a share of one, and above it
// more (the boundary of direct, on two and three replicas).
func TestSync_DirectTakesOnlyLimitsBelowTheReplicas(t *testing.T) {
	s := &syncer{}
	for _, n := range []int64{1, 2, 3} {
		s.replicas.Store(n)
		hits := make([]Hit, 5)
		var want []int
		for j := range hits {
			hits[j] = Hit{Key: fmt.Sprint(j), Limit: int64(j)}
			if n > 1 && int64(j) < n {
				want = append(want, j)
			}
		}
		if got := s.direct(hits); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%d replicas, limits 0-4: direct %v, want %v", n, got, want)
		}
	}
}

// A request with a rule decided directly (an observed rule of 1, which
// refuses nothing) beside a leased one is still held to the leased rule:
// its hits go to the sync view, not dropped with the direct ones.
func TestSync_ADirectRuleBesideALeasedOneLeavesTheLeasedOneDeciding(t *testing.T) {
	watch := burstRule(1, time.Minute)
	watch.Name, watch.Mode = "watch", Observe
	opts := rulesConfig(watch, burstRule(4, time.Minute))
	opts.Sync = 50 * time.Millisecond
	ls := manualFleet(t, 2, opts, keyspace.MustNew(servicetest.KeyPrefix(t)), newRegisteringMemory())
	passed := 0
	for range 10 {
		if !ls[0].Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.146"}).Blocked() {
			passed++
		}
	}
	if passed < 2 || passed > 4 {
		t.Errorf("passed %d of 10 beside an observed rule of 1, want 2-4 (the enforced rule of 4 over two replicas)", passed)
	}
}

// A request the view refuses does not spend a rule the store decides
// (a limit below the replicas): its hit is not sent when the view
// refuses on its own counts, and taken back when the view refuses after
// asking the store (here: per_ip's share is 1 of 3, its ask leaves it
// none). It was sent first, so every request another rule refused spent
// the tightest limit of all (two logins a minute), and the client was
// then refused by it once the other rule let it pass.
func TestSync_ARequestTheViewRefusesSpendsNoDirectRule(t *testing.T) {
	opts := rulesConfig(
		Rule{Name: "per_ip", Scope: ScopeIP, Algorithm: FixedWindow, Limit: 3, Window: time.Minute, Routes: []string{AllRoutes}},
		Rule{Name: "login", Scope: ScopeIP, Algorithm: FixedWindow, Limit: 2, Window: time.Minute, Routes: []string{AllRoutes}},
	)
	opts.Sync = 50 * time.Millisecond
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	store := newRegisteringMemory()
	a := manualFleet(t, 3, opts, ks, store)[0]
	ip := "203.0.113.163"
	refused := 0
	for i := range 6 {
		v := a.Decide(context.Background(), Subject{Route: "portal", IP: ip})
		if !v.Blocked() {
			continue
		}
		refused++
		for _, d := range v.Decisions {
			if d.Rule == "login" && d.Outcome == OutcomeBlock {
				t.Errorf("request %d, refused by per_ip on the view, reports the login rule refusing: it had room", i)
			}
		}
	}
	if refused == 0 {
		t.Fatal("no request was refused: the test proves nothing")
	}
	// Held refused by per_ip's spent share, a request costs no store call:
	// the login rule is not sent.
	a.deny.purge() // the deny cache would refuse it before the view
	before := counterOf(t, a.m.rlCommands)
	if !a.Decide(context.Background(), Subject{Route: "portal", IP: ip}).Blocked() {
		t.Fatal("a seventh request passed")
	}
	if after := counterOf(t, a.m.rlCommands); after != before {
		t.Errorf("a request the view refuses on its own counts cost %v store calls, want none", after-before)
	}
	login := Hit{Key: ks.RateLimit("login", ip), Algorithm: FixedWindow, TTL: time.Minute, Limit: 2}
	var c [1]Count
	store.peek([]Hit{login}, c[:])
	if n := c[0].N - 1; n != 6-int64(refused) {
		t.Errorf("the login rule's window counts %d after %d requests, %d of them refused by per_ip; want only the %d that passed", n, 6, refused, 6-refused)
	}
}

// Fresh attack pass 22 R01 (medium): a request the store refuses for a
// rule it decides (a limit below the replicas) counts into none of the
// view's keys. The view counted them first, so one address's refused
// logins filled a route-wide window of 20 over two replicas and every
// other client was refused for the rest of it.
func TestSync_ARequestADirectRuleRefusesSpendsNoViewRule(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, GCRA, SlidingWindow} {
		t.Run(algName(alg), func(t *testing.T) {
			opts := rulesConfig(
				Rule{Name: "login", Scope: ScopeIP, Algorithm: GCRA, Limit: 1, Window: time.Minute, Routes: []string{AllRoutes}},
				Rule{Name: "route", Scope: ScopeRoute, Algorithm: alg, Limit: 20, Window: 30 * time.Second, Routes: []string{AllRoutes}},
			)
			opts.Sync = 50 * time.Millisecond
			ks := keyspace.MustNew(servicetest.KeyPrefix(t))
			a := manualFleet(t, 2, opts, ks, newRegisteringMemory())[0]
			refused := 0
			for range 8 {
				if a.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.164"}).Blocked() {
					refused++
				}
			}
			if refused != 7 {
				t.Fatalf("the login rule (1 a minute) refused %d of 8, want 7: the test proves nothing", refused)
			}
			route := Hit{Key: ks.RateLimit("route", "portal"), Algorithm: alg, TTL: 30 * time.Second, Period: 30 * time.Second, Limit: 20}
			var c [1]Count
			a.sync.view.peek([]Hit{route}, c[:])
			if want := (Count{N: 2, Allowed: true, Remaining: 18}); alg == FixedWindow && c[0].N != want.N || alg != FixedWindow && c[0].Remaining != want.Remaining {
				t.Errorf("the route window after 1 pass and 7 refusals by login: %+v, want it to hold the pass only", c[0])
			}
			a.sync.mu.Lock()
			k, _ := a.sync.keys.get(route.Key)
			spent := k.spent
			a.sync.mu.Unlock()
			if spent != 1 {
				t.Errorf("the route's lease has %d spent after 1 pass and 7 refusals by login, want 1", spent)
			}
		})
	}
}
