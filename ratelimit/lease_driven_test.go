package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// registeringMemory is the embedded store shared by a fleet, as a test
// plays one: it registers replicas on its own clock as the sync script
// does (a member counts while seen within the registration's lifetime),
// so Limiters on one MemoryStore lease among themselves.
type registeringMemory struct {
	*MemoryStore
	mu   sync.Mutex
	seen map[string]time.Time
}

func newRegisteringMemory() *registeringMemory {
	return &registeringMemory{MemoryStore: NewMemoryStore(0), seen: map[string]time.Time{}}
}

func (s *registeringMemory) SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (time.Time, int64, error) {
	now, err := s.Sync(ctx, ops, out)
	if err != nil || reg.ID == "" {
		return now, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[reg.ID] = now
	n := int64(0)
	for id, at := range s.seen {
		if now.Sub(at) < reg.TTL {
			n++
		} else {
			delete(s.seen, id)
		}
	}
	return now, n, nil
}

var _ RegisteringSyncer = (*registeringMemory)(nil)

// drivenRun is one run of driveReplicas: the passes per window of the
// rule and the asks the replicas sent.
type drivenRun struct {
	per  []int
	asks float64
}

// driveReplicas runs n synchronizing Limiters (sync 50 ms) on one store
// on an injected clock: one client's requests round-robin over them, one
// per simulated millisecond from a window edge for windows windows, each
// replica's sync round every 50 simulated ms at its own phase (replica i
// at phases[i] ms into every interval), nothing in real time. pin sets
// the store's clock.
func driveReplicas(t *testing.T, n int, rule Rule, mk drivenStore, windows int, phases []int) drivenRun {
	t.Helper()
	store, ks, pin := mk(t)
	var virt atomic.Int64
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) // a window edge of every window used here
	virt.Store(start.UnixNano())
	clock := func() time.Time { return time.Unix(0, virt.Load()).UTC() }
	set := func(at time.Time) { virt.Store(at.UnixNano()); pin(at) }
	set(start)
	opts := rulesConfig(rule)
	opts.Sync = 50 * time.Millisecond
	opts.Timeout = time.Second // a loaded machine must not fail an exchange
	ls := make([]*Limiter, n)
	for i := range ls {
		ls[i], _ = newTestLimiterWith(t, opts, ks, store, WithClock(clock))
	}
	ctx := context.Background()
	// Registration: two idle rounds each (the idle one registers every
	// half lifetime of real time: forced here), so each sees all n.
	for range 2 {
		for _, l := range ls {
			l.sync.lastReg.Store(0)
			l.syncRound(ctx)
		}
	}
	for i, l := range ls {
		if got := l.sync.replicas.Load(); got != int64(n) {
			t.Fatalf("replica %d sees %d replicas, want %d", i, got, n)
		}
	}
	s := Subject{Route: "portal", IP: "203.0.113.93"}
	per := make([]int, windows)
	w := rule.Window
	for ms := range windows * int(w/time.Millisecond) {
		set(start.Add(time.Duration(ms) * time.Millisecond))
		for i, l := range ls {
			if ms%50 == phases[i%len(phases)] {
				l.syncRound(ctx)
			}
		}
		if !ls[ms%n].Decide(ctx, s).Blocked() {
			per[ms/int(w/time.Millisecond)]++
		}
	}
	run := drivenRun{per: per}
	for _, l := range ls {
		run.asks += counterOf(t, l.sync.asks)
	}
	return run
}

// Three replicas on one store, one client round-robin at 1 000 requests
// per (simulated) second for 5 windows of 50 per 1 s, each replica's
// rounds every 50 ms at its own phase, on an injected clock: the rounds
// and the asks are the only exchanges, so the run is deterministic on the
// embedded store and on a real Redis (the script's clock pinned; its
// keys' real-time TTLs are longer than the run needs). Each replica gets
// a request every 3 ms, so it spends the share it gives itself of the
// key it has not read (floor(50 / 3) = 16) in 48 ms.
//
// When every replica's first round comes within 45 ms of the key's first
// request (its fresh share is then reserved before anyone asks), every
// window, the key's first included, passes at most limit + 5 on a fixed
// or sliding window, and GCRA at most what one replica passes in it + 5.
// When a replica's first round comes later, an ask may precede it and
// lease from a store that does not hold that replica's share yet: the
// key's first window is then held to the bound of docs/rate-limiting.md
// ("A concurrent burst"), limit + (N − 1) × floor(limit / N), and every
// later window to limit + 5. Always: at most 1.1 × one replica over the
// run, and no window passes less than one replica in it − 5 (the requests
// a lease of floor(remaining / 3) cannot share), so the bound is not met
// by refusing.
func TestSync_ThreeReplicasHoldEveryWindowOnADrivenClock(t *testing.T) {
	t.Parallel()
	const (
		replicas = 3
		limit    = 50
		window   = time.Second
		windows  = 5
		slack    = 5
		under    = 5
		burst    = (replicas - 1) * (limit / replicas)
	)
	stores := map[string]drivenStore{
		"memory": func(t *testing.T) (Store, keyspace.Keyspace, func(time.Time)) {
			s := newRegisteringMemory()
			var at atomic.Int64
			s.SetClock(func() time.Time { return time.Unix(0, at.Load()).UTC() })
			return s, keyspace.MustNew(servicetest.KeyPrefix(t)), func(now time.Time) { at.Store(now.UnixNano()) }
		},
		"go-redis": func(t *testing.T) (Store, keyspace.Keyspace, func(time.Time)) {
			prefix := servicetest.KeyPrefix(t)
			s := NewRedisStore(testRedis(t, prefix))
			return s, keyspace.MustNew(prefix), func(now time.Time) { pinStoreClock(s, now) }
		},
	}
	// The rounds' phases, ms into every interval, per replica (a round at
	// a millisecond runs before that millisecond's request).
	phaseSets := [][]int{{10, 27, 44}, {5, 30, 15}, {20, 35, 3}, {30, 10, 25}, {0, 17, 34}, {40, 20, 0}, {49, 49, 49}, {45, 46, 47}, {48, 0, 25}}
	for _, storeName := range []string{"memory", "go-redis"} {
		for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
			if storeName == "go-redis" && alg == FixedWindow {
				continue // Redis ends a fixed window by its PTTL, in real time
			}
			for _, phases := range phaseSets {
				// late: some replica's first round comes 45 ms or more
				// after its first request (replica i's is at ms i).
				late := false
				for i, p := range phases {
					late = late || (p-i+49)%50+1 >= 45
				}
				t.Run(fmt.Sprintf("%s/%v/phases%v", storeName, alg, phases), func(t *testing.T) {
					t.Parallel()
					rule := burstRule(limit, window)
					rule.Algorithm = alg
					one := driveReplicas(t, 1, rule, stores[storeName], windows, phases)
					three := driveReplicas(t, replicas, rule, stores[storeName], windows, phases)
					t.Logf("%v: 1 replica passed per window %v; %d replicas %v (%v asks)", alg, one.per, replicas, three.per, three.asks)
					total, totalOne := 0, 0
					for i, got := range three.per {
						total, totalOne = total+got, totalOne+one.per[i]
						bound := limit + slack
						if alg == GCRA {
							bound = one.per[i] + slack
						}
						if i == 0 && late {
							bound = max(limit, one.per[i]) + burst
						}
						if got > bound {
							t.Errorf("window %d passed %d, want ≤ %d", i, got, bound)
						}
						if got < one.per[i]-under {
							t.Errorf("window %d passed %d, want ≥ %d (one replica %d − %d)", i, got, one.per[i]-under, one.per[i], under)
						}
					}
					if float64(total) > 1.1*float64(totalOne) {
						t.Errorf("%d replicas passed %d, one replica %d: want ≤ 1.1 ×", replicas, total, totalOne)
					}
				})
			}
		}
	}
}

// drivenStore makes a store for driveReplicas: the store, its keyspace
// and the function that sets its clock.
type drivenStore func(t *testing.T) (Store, keyspace.Keyspace, func(time.Time))

// counterOf reads a counter's value.
func counterOf(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
