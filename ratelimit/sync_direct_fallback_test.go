package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// hitFailingStore is a Redis store whose request path fails (Hit) while
// its synchronization (Sync, SyncRegister) answers: the replicas register
// and count each other, and every rule the store decides directly falls
// back.
type hitFailingStore struct{ *RedisStore }

func (s hitFailingStore) Hit(context.Context, []Hit, []Count) (time.Time, error) {
	return time.Time{}, errInjected
}

// A rule the store decides directly (a login limit of 1 over two
// replicas) whose round trip fails is decided by the local fallback
// (on_store_error: local); a request that fallback refuses counts into
// none of the view's rules, as a request the store refuses does
// (hitSplit's second step). A request the fallback lets through is
// decided on the view and counted there.
func TestSync_ADirectRuleTheFallbackRefusesSpendsNoViewRule(t *testing.T) {
	prefix := servicetest.KeyPrefix(t)
	store := hitFailingStore{NewRedisStore(testRedis(t, prefix))}
	opts := rulesConfig(
		Rule{Name: "login", Scope: ScopeIP, Algorithm: FixedWindow, Limit: 1, Window: time.Minute, Routes: []string{AllRoutes}},
		Rule{Name: "route", Scope: ScopeRoute, Algorithm: FixedWindow, Limit: 20, Window: time.Minute, Routes: []string{AllRoutes}},
	)
	opts.Sync = 50 * time.Millisecond
	opts.OnStoreError = LocalIP
	ks := keyspace.MustNew(prefix)
	a := manualFleet(t, 2, opts, ks, store)[0]
	s := Subject{Route: "portal", IP: "203.0.113.174"}
	var outcomes []Outcome
	for range 3 {
		v := a.Decide(context.Background(), s)
		for _, d := range v.Decisions {
			if d.Rule == "login" {
				outcomes = append(outcomes, d.Outcome)
			}
		}
		a.deny.purge() // each request reaches the fallback
	}
	if want := []Outcome{OutcomeAllow, OutcomeBlock, OutcomeBlock}; len(outcomes) != len(want) || outcomes[0] != want[0] || outcomes[1] != want[1] || outcomes[2] != want[2] {
		t.Fatalf("the login rule's outcomes on the fallback: %v, want %v", outcomes, want)
	}
	route := Hit{Key: ks.RateLimit("route", "portal"), Algorithm: FixedWindow, TTL: time.Minute, Limit: 20}
	var c [1]Count
	a.sync.view.peek([]Hit{route}, c[:])
	if n := c[0].N - 1; n != 1 {
		t.Errorf("the route's view counts %d after 3 requests, 2 of them refused by the login rule's fallback; want only the 1 that passed", n)
	}
}
