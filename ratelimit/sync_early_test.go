package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// A key is exchanged early only once a replica has spent half of the
// share it gave itself of it (floor(50 / 3) = 16: at the 8th request)
// before any exchange of it: 10 000 keys hit once each (an IP scan) and a
// key hit 7 times cost no command; the 8th request of a hot key starts
// one exchange (decided without waiting for it: the exchange has not run
// when Decide returns), which puts the replica's share in the store (8
// passed, 8 reserved) in one store command; the rest of the share starts
// none.
func TestSync_OnlyAHotNewKeyIsExchangedEarly(t *testing.T) {
	t.Parallel()
	store := newRegisteringMemory()
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	opts := rulesConfig(burstRule(50, time.Second))
	opts.Sync = 50 * time.Millisecond
	ls := make([]*Limiter, 3)
	var spawned []func()
	for i := range ls {
		ls[i], _ = newTestLimiterWith(t, opts, ks, store)
		ls[i].sync.spawn = func(f func()) { spawned = append(spawned, f) }
	}
	ctx := context.Background()
	registerFleet(t, ls[:])
	l := ls[0]
	commands := func() float64 { return counterOf(t, l.m.rlCommands) }
	before := commands()
	for i := range 10_000 {
		if l.Decide(ctx, Subject{Route: "portal", IP: "198.18." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)}).Blocked() {
			t.Fatalf("scan request %d refused", i)
		}
	}
	hot := Subject{Route: "portal", IP: "203.0.113.94"}
	for i := range 7 {
		if l.Decide(ctx, hot).Blocked() {
			t.Fatalf("hot request %d refused", i)
		}
	}
	if len(spawned) != 0 || commands() != before {
		t.Fatalf("keys hit once and a key hit 7 times started %d early exchanges and sent %v commands, want 0 and 0", len(spawned), commands()-before)
	}
	if l.Decide(ctx, hot).Blocked() {
		t.Fatal("hot request 8 refused within the share")
	}
	if len(spawned) != 1 || commands() != before {
		t.Fatalf("the 8th request of the hot key started %d early exchanges and waited for %v commands, want 1 and 0", len(spawned), commands()-before)
	}
	spawned[0]()
	if got := commands() - before; got != 1 {
		t.Errorf("the early exchange sent %v commands, want 1", got)
	}
	if got := counterOf(t, l.sync.earlies); got != 1 {
		t.Errorf("borda_ratelimit_sync_early_total = %v, want 1", got)
	}
	// The store holds the replica's share: 8 passed, 8 reserved.
	out := make([]KeyState, 1)
	if _, err := store.Sync(ctx, []SyncOp{{Hit: syncedHit(l, ks.RateLimit("burst", hot.IP))}}, out); err != nil {
		t.Fatal(err)
	}
	if out[0].N != 16 {
		t.Errorf("the store counts %d for the hot key after its early exchange, want 16 (the replica's share)", out[0].N)
	}
	for i := 8; i < 16; i++ {
		if l.Decide(ctx, hot).Blocked() {
			t.Fatalf("hot request %d refused within the share", i+1)
		}
	}
	if len(spawned) != 1 {
		t.Errorf("%d early exchanges of one share, want 1", len(spawned))
	}
}

// TestStopWaitsForTheEarlyExchangesOnTheWire: Stop returns only once no
// early exchange is on the wire, or with its context's error when one is
// still there at the deadline.
func TestStopWaitsForTheEarlyExchangesOnTheWire(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(burstRule(10, time.Minute))
	cfg.Sync = time.Hour
	l, _ := newTestLimiter(t, cfg, keyspace.MustNew("olp-dev:tearly:"), NewMemoryStore(0))
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	l.sync.earlyRun.goRun(func() { <-release })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop with an early exchange still on the wire = %v, want context.DeadlineExceeded", err)
	}
	close(release)
	if err := l.sync.earlyRun.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A share spent whole by the hit that reaches its half (a share of 2:
// half is 2) starts no early exchange: the next hit asks for a lease,
// which exchanges the key anyway, so an early one would cost a command
// for nothing.
func TestSync_AShareSpentWholeStartsNoEarlyExchange(t *testing.T) {
	store := newRegisteringMemory()
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	opts := rulesConfig(burstRule(4, time.Minute)) // a share of 2 on each of two replicas
	opts.Sync = 50 * time.Millisecond
	ls := manualFleet(t, 2, opts, ks, store)
	var spawned int
	ls[0].sync.spawn = func(func()) { spawned++ }
	for i := range 2 {
		if ls[0].Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.147"}).Blocked() {
			t.Fatalf("request %d refused within the share", i+1)
		}
	}
	if spawned != 0 {
		t.Errorf("a share of 2 spent whole started %d early exchanges, want 0", spawned)
	}
}
