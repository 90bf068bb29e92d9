package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// A key's first round sends what is left of the replica's share with its
// view (prepare's reservation), on every algorithm: the store holds that
// share for the replica, so another replica flooding the key meanwhile
// is leased only the rest, and the two together pass the limit, not the
// limit and the first replica's unspent share. Without the reservation
// (the guard negated, which no test noticed) the second replica passed 9
// of 10 and the first then 4 more on its share: 14 of 10.
func TestSync_AFreshKeysRoundReservesTheRestOfItsShare(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			r := burstRule(10, time.Minute)
			r.Algorithm = alg
			opts := rulesConfig(r)
			opts.Sync = 50 * time.Millisecond
			ls := manualFleet(t, 2, opts, keyspace.MustNew(servicetest.KeyPrefix(t)), newRegisteringMemory())
			a, b := ls[0], ls[1]
			ctx := context.Background()
			s := Subject{Route: "portal", IP: "203.0.113.145"}
			passed := 0
			if !a.Decide(ctx, s).Blocked() {
				passed++
			}
			a.syncRound(ctx) // the key's first round: its view and the rest of its share
			for range 20 {
				if !b.Decide(ctx, s).Blocked() {
					passed++
				}
			}
			fromB := passed - 1
			for range 20 {
				if !a.Decide(ctx, s).Blocked() {
					passed++
				}
			}
			if passed > 10 {
				t.Errorf("%v: two replicas passed %d of a limit of 10 (the second %d, after the first's round)", alg, passed, fromB)
			}
			if fromB > 5 {
				t.Errorf("%v: the second replica passed %d after the first's round, want at most the other half (5): the first's share was not reserved", alg, fromB)
			}
		})
	}
}
