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

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// registeringMemory is the embedded store shared by a fleet, as a test
// plays one: it registers replicas on its own clock as the sync script
// does (a member counts while seen within the registration's lifetime),
// so Limiters on one MemoryStore lease among themselves.
// It keeps the exchange markers as the sync script does (without their
// lifetime): a call that ran records what each key leased; a call sent
// again to resolve it answers the keys' state and those leases, or
// Leased -1 when it never ran (the fakes that wrap it fail a call before
// it runs).
type registeringMemory struct {
	*MemoryStore
	mu      sync.Mutex
	seen    map[string]time.Time
	markers map[string][]int64   // leased per op, by Registration.Exchange
	ends    map[string][]float64 // a fixed window's end per op when the call ran
}

func newRegisteringMemory() *registeringMemory {
	return &registeringMemory{MemoryStore: NewMemoryStore(0), seen: map[string]time.Time{}, markers: map[string][]int64{}, ends: map[string][]float64{}}
}

func (s *registeringMemory) SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (time.Time, int64, error) {
	s.mu.Lock()
	leased, ran := s.markers[reg.Exchange]
	if reg.Exchange != "" && !ran {
		s.markers[reg.Exchange] = nil // a late first call runs no more
	}
	s.mu.Unlock()
	var now time.Time
	var err error
	switch {
	case reg.Exchange != "" && ran:
		hits := make([]Hit, len(ops))
		for i := range ops {
			hits[i] = ops[i].Hit
		}
		now = s.snapshot(hits, out)
		for i := range out {
			if !reg.Resolve || leased == nil {
				out[i].Leased = 0
				if reg.Resolve {
					out[i] = KeyState{Leased: -1}
				}
				continue
			}
			out[i].Leased = leased[i]
			if h := ops[i].Hit; h.Algorithm != GCRA && h.Algorithm != SlidingWindow && !sameWindow(h, s.ends[reg.Exchange][i], out[i]) {
				out[i].Leased, out[i].Ended = 0, true // the call's window is over
			}
		}
	case reg.Resolve:
		now = s.now()
		for i := range out {
			out[i] = KeyState{Leased: -1}
		}
	default:
		now, err = s.Sync(ctx, ops, out)
		if err == nil && reg.Exchange != "" {
			l := make([]int64, len(out))
			e := make([]float64, len(out))
			for i := range out {
				l[i], e[i] = out[i].Leased, out[i].End
			}
			s.mu.Lock()
			s.markers[reg.Exchange], s.ends[reg.Exchange] = l, e
			s.mu.Unlock()
		}
	}
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
// rule, the asks and early exchanges the replicas sent, and their store
// calls (rounds, asks, early exchanges) during the flood.
type drivenRun struct {
	per           []int
	asks, earlies float64
	calls         float64
}

// driveReplicas runs n synchronizing Limiters (sync 50 ms) on one store
// on an injected clock: one client's requests round-robin over them, one
// per simulated millisecond from a window edge for windows windows, each
// replica's sync round every 50 simulated ms at its own phase (replica i
// at phases[i] ms into every interval), nothing in real time. An early
// exchange (sync_early.go) lands latency simulated ms after the request
// that started it: it runs then, before that millisecond's rounds and
// request (0: none is run, as before early exchanges). pin sets the
// store's clock.
func driveReplicas(t *testing.T, n int, rule Rule, mk drivenStore, windows int, phases []int, latency int) drivenRun {
	t.Helper()
	return driveReplicasEvery(t, n, rule, mk, windows, phases, latency, 1)
}

// driveReplicasEvery is driveReplicas with one request every every
// simulated ms (the first at ms 0).
func driveReplicasEvery(t *testing.T, n int, rule Rule, mk drivenStore, windows int, phases []int, latency, every int) drivenRun {
	t.Helper()
	return driveReplicasTuned(t, n, rule, mk, windows, phases, latency, every, 0, nil)
}

// driveReplicasTuned is driveReplicasEvery with the first request at ms
// first (then every every ms) and tune (nil: none) applied to the
// replicas' options after driveReplicas' own.
func driveReplicasTuned(t *testing.T, n int, rule Rule, mk drivenStore, windows int, phases []int, latency, every, first int, tune func(*Options)) drivenRun {
	t.Helper()
	store, ks, pin := mk(t)
	var virt atomic.Int64
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) // a window edge of every window used here
	virt.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, virt.Load()).UTC() }
	set := func(at time.Time) { virt.Store(at.UnixNano()); pin(at) }
	set(start)
	opts := rulesConfig(rule)
	opts.Sync = 50 * time.Millisecond
	opts.Timeout = time.Second // a loaded machine must not fail an exchange
	if tune != nil {
		tune(&opts)
	}
	type early struct {
		at  int
		run func()
	}
	var pending []early // the early exchanges on the (simulated) wire
	ms := 0
	ls := make([]*Limiter, n)
	for i := range ls {
		o := opts
		o.Clock = clock.Func(now)
		ls[i], _ = newTestLimiterWith(t, o, ks, store)
		ls[i].sync.spawn = func(f func()) {
			if latency > 0 {
				pending = append(pending, early{at: ms + latency, run: f})
			}
		}
	}
	ctx := context.Background()
	registerFleet(t, ls) // so each sees all n
	callsBefore := 0.0
	for _, l := range ls {
		callsBefore += counterOf(t, l.m.rlCommands)
	}
	s := Subject{Route: "portal", IP: "203.0.113.93"}
	per := make([]int, windows)
	w := rule.Window
	for ; ms < windows*int(w/time.Millisecond); ms++ {
		set(start.Add(time.Duration(ms) * time.Millisecond))
		for len(pending) > 0 && pending[0].at <= ms {
			e := pending[0]
			pending = pending[1:]
			e.run()
		}
		for i, l := range ls {
			if ms%50 == phases[i%len(phases)] {
				l.syncRound(ctx)
			}
		}
		if ms < first || (ms-first)%every != 0 {
			continue
		}
		if !ls[((ms-first)/every)%n].Decide(ctx, s).Blocked() {
			per[ms/int(w/time.Millisecond)]++
		}
	}
	run := drivenRun{per: per, calls: -callsBefore}
	for _, l := range ls {
		run.asks += counterOf(t, l.sync.asks)
		run.earlies += counterOf(t, l.sync.earlies)
		run.calls += counterOf(t, l.m.rlCommands)
	}
	return run
}

// Three replicas on one store, one client round-robin at 1 000 requests
// per (simulated) second for 5 windows of 50 per 1 s, each replica's
// rounds every 50 ms at its own phase, on an injected clock: the rounds,
// the asks and the early exchanges (landing 1-5 simulated ms after the
// request that started them) are the only exchanges, so the run is
// deterministic on the embedded store and on a real Redis (the script's
// clock pinned; its keys' real-time TTLs are longer than the run needs).
// Each replica gets a request every 3 ms, so it spends the share it gives
// itself of the key it has not exchanged (floor(50 / 3) = 16) in 48 ms,
// and has spent half of it 21 ms after its first request: its early
// exchange then puts the share in the store before any replica asks,
// whatever the rounds' phases (before early exchanges, a replica whose
// first round came 45 ms or more after its first request let another's
// ask lease from a store without its share: 54-59 passed in a fixed or
// sliding window's first window, GCRA up to 105 where one replica passes
// 99).
//
// Every window, the key's first included, passes at most limit + 5 on a
// fixed or sliding window, and GCRA at most what one replica passes in it
// + 5; at most 1.1 × one replica over the run, and no window passes less
// than one replica in it − 5 (the requests a lease of floor(remaining /
// 3) cannot share), so the bound is not met by refusing. Each replica
// exchanges the key early at most once per fresh share (a flood asks at
// every window's edge: one early exchange each over the run).
func TestSync_ThreeReplicasHoldEveryWindowOnADrivenClock(t *testing.T) {
	t.Parallel()
	const (
		replicas = 3
		limit    = 50
		window   = time.Second
		windows  = 5
		slack    = 5
		under    = 5
	)
	stores := map[string]drivenStore{
		"memory": memoryDrivenStore,
		"go-redis": func(t *testing.T) (Store, keyspace.Keyspace, func(time.Time)) {
			prefix := servicetest.KeyPrefix(t)
			s := NewRedisStore(testRedis(t, prefix))
			return s, keyspace.MustNew(prefix), func(now time.Time) { pinStoreClock(s, now) }
		},
	}
	// The rounds' phases, ms into every interval, per replica (a round at
	// a millisecond runs before that millisecond's request). Replica i's
	// first request is at ms i: the last four sets have a first round 45
	// ms or more after it.
	phaseSets := [][]int{{10, 27, 44}, {5, 30, 15}, {20, 35, 3}, {30, 10, 25}, {0, 17, 34}, {40, 20, 0}, {49, 49, 49}, {45, 46, 47}, {48, 0, 25}}
	for _, storeName := range []string{"memory", "go-redis"} {
		for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
			if storeName == "go-redis" && alg == FixedWindow {
				continue // Redis ends a fixed window by its PTTL, in real time
			}
			for p, phases := range phaseSets {
				// Every latency of 1-5 ms on the embedded store; one per
				// phase set, in turn, on Redis (its runs are slower).
				latencies := []int{1, 2, 3, 4, 5}
				if storeName == "go-redis" {
					latencies = latencies[p%5 : p%5+1]
				}
				for _, latency := range latencies {
					t.Run(fmt.Sprintf("%s/%v/phases%v/latency%dms", storeName, alg, phases, latency), func(t *testing.T) {
						t.Parallel()
						rule := burstRule(limit, window)
						rule.Algorithm = alg
						one := driveReplicas(t, 1, rule, stores[storeName], windows, phases, latency)
						three := driveReplicas(t, replicas, rule, stores[storeName], windows, phases, latency)
						t.Logf("%v: 1 replica passed per window %v; %d replicas %v (%v asks, %v early exchanges, %v store calls)", alg, one.per, replicas, three.per, three.asks, three.earlies, three.calls)
						if one.earlies != 0 || one.asks != 0 {
							t.Errorf("one replica asked %v times and exchanged early %v times, want 0 and 0", one.asks, one.earlies)
						}
						if three.earlies > replicas {
							t.Errorf("%v early exchanges, want ≤ %d (one per replica: a flood's key is fresh only at its first request)", three.earlies, replicas)
						}
						total, totalOne := 0, 0
						for i, got := range three.per {
							total, totalOne = total+got, totalOne+one.per[i]
							if bound := windowBound(alg, limit, one.per[i], slack); got > bound {
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
}

// drivenStore makes a store for driveReplicas: the store, its keyspace
// and the function that sets its clock.
type drivenStore func(t *testing.T) (Store, keyspace.Keyspace, func(time.Time))

// memoryDrivenStore is a drivenStore of a fleet's embedded store
// (registeringMemory) on the driven clock.
func memoryDrivenStore(t *testing.T) (Store, keyspace.Keyspace, func(time.Time)) {
	s := newRegisteringMemory()
	var at atomic.Int64
	s.SetClock(clock.Func(func() time.Time { return time.Unix(0, at.Load()).UTC() }))
	return s, keyspace.MustNew(servicetest.KeyPrefix(t)), func(now time.Time) { at.Store(now.UnixNano()) }
}

// windowBound is the most a window of a flood over several replicas may
// pass: the limit + slack, and on GCRA (no window of its own) what one
// replica passed in it (one) + slack.
func windowBound(alg Algorithm, limit, one, slack int) int {
	if alg == GCRA {
		return one + slack
	}
	return limit + slack
}

// counterOf reads a counter's value.
func counterOf(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Fresh attack pass 13 R10: two replicas, one client alternating between
// them at a pace far below a flood (a request every 200 ms), a fixed
// window of 20 per 10 s: a window passed 8 where one replica passes 20.
// Every window passes what one replica passes, within the slack, for
// every pace and phase tried.
//
// On a store whose fixed-window ends move by a millisecond between
// answers, as Redis's do (the end is derived from the key's PTTL), the
// replicas compared their lease's window to their view's by equality and
// lost the reservation: 17-18 of 20 here, 8-17 on two real binaries. Also
// run on a store whose ends do not move, where the idle registration
// must run on the Limiter's clock (on the wall clock no time passes in a
// driven run, a replica whose hits the deny cache answered dropped out of
// the registration, and the other's lease was cut when it came back).
func TestSync_TwoReplicasAtAWalkingPacePassTheLimit(t *testing.T) {
	t.Parallel()
	const (
		limit  = 20
		window = 10 * time.Second
		slack  = 2
	)
	stores := map[string]drivenStore{}
	for _, jitter := range []bool{false, true} {
		name := "memory"
		if jitter {
			name = "memory-ends-jitter"
		}
		stores[name] = func(t *testing.T) (Store, keyspace.Keyspace, func(time.Time)) {
			s := newRegisteringMemory()
			var at atomic.Int64
			s.SetClock(clock.Func(func() time.Time { return time.Unix(0, at.Load()).UTC() }))
			var st Store = s
			if jitter {
				st = &jitteringEnds{registeringMemory: s}
			}
			return st, keyspace.MustNew(servicetest.KeyPrefix(t)), func(now time.Time) { at.Store(now.UnixNano()) }
		}
	}
	for storeName, mk := range stores {
		for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
			for _, every := range []int{200, 97, 450} {
				for _, phases := range [][]int{{10, 35}, {0, 0}, {49, 1}} {
					for _, latency := range []int{0, 3} {
						t.Run(fmt.Sprintf("%s/%v/every%dms/phases%v/latency%d", storeName, alg, every, phases, latency), func(t *testing.T) {
							t.Parallel()
							rule := burstRule(limit, window)
							rule.Algorithm = alg
							one := driveReplicasEvery(t, 1, rule, mk, 2, phases, latency, every)
							two := driveReplicasEvery(t, 2, rule, mk, 2, phases, latency, every)
							t.Logf("1 replica %v; 2 replicas %v (%v asks, %v early)", one.per, two.per, two.asks, two.earlies)
							for i := range two.per {
								if two.per[i] < one.per[i]-slack || two.per[i] > one.per[i]+slack {
									t.Errorf("window %d passed %d with two replicas, one replica %d (±%d)", i, two.per[i], one.per[i], slack)
								}
							}
						})
					}
				}
			}
		}
	}
}

// jitteringEnds is a fleet's embedded store whose answers give a fixed
// window's end (KeyState.End) a millisecond early or late in turn, as Redis
// does: the sync script derives the end from the key's PTTL at each
// answer, so one window's end moves by a millisecond between answers.
type jitteringEnds struct {
	*registeringMemory
	n atomic.Int64
}

func (s *jitteringEnds) jitter(ops []SyncOp, out []KeyState) {
	for i := range out {
		if a := ops[i].Hit.Algorithm; a != GCRA && a != SlidingWindow && out[i].present() {
			out[i].End += float64(s.n.Add(1)%3 - 1)
		}
	}
}

func (s *jitteringEnds) Sync(ctx context.Context, ops []SyncOp, out []KeyState) (time.Time, error) {
	now, err := s.registeringMemory.Sync(ctx, ops, out)
	s.jitter(ops, out)
	return now, err
}

func (s *jitteringEnds) SyncRegister(ctx context.Context, ops []SyncOp, out []KeyState, reg Registration) (time.Time, int64, error) {
	now, n, err := s.registeringMemory.SyncRegister(ctx, ops, out, reg)
	s.jitter(ops, out)
	return now, n, err
}

// manualFleet builds n Limiters on store, registered with each other,
// whose early exchanges do not run: the test sends every call itself.
func manualFleet(t testing.TB, n int, opts Options, ks keyspace.Keyspace, store Store) []*Limiter {
	t.Helper()
	ls := make([]*Limiter, n)
	for i := range ls {
		ls[i], _ = newTestLimiterWith(t, opts, ks, store)
		ls[i].sync.spawn = func(func()) {}
	}
	registerFleet(t, ls)
	return ls
}

// registerFleet registers every Limiter of ls with their shared store,
// twice each (an idle round registers every half lifetime only: forced
// here), and fails unless each then counts len(ls) replicas.
func registerFleet(t testing.TB, ls []*Limiter) {
	t.Helper()
	for range 2 {
		for _, l := range ls {
			l.sync.lastReg.Store(0)
			l.syncRound(context.Background())
		}
	}
	for i, l := range ls {
		if got := l.sync.replicas.Load(); got != int64(len(ls)) {
			t.Fatalf("replica %d sees %d replicas, want %d", i, got, len(ls))
		}
	}
}
