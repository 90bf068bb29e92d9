package ratelimit

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// faultProxy puts an in-process toxiproxy on 127.0.0.1 in front of
// upstream and returns it with its listen address.
func faultProxy(t testing.TB, upstream string) (*toxiproxy.Proxy, string) {
	return servicetest.FaultProxy(t, upstream)
}

func addToxic(t testing.TB, p *toxiproxy.Proxy, spec string) { servicetest.AddToxic(t, p, spec) }

func faultConfig(timeout time.Duration) Options {
	cfg := rulesConfig(burstRule(1000, 5*time.Second))
	cfg.Timeout = timeout
	cfg.BreakerFailures, cfg.BreakerOpenFor = 5, time.Second
	return cfg
}

// TestDecide_ContextTimeoutBoundsSlowRedis: Redis answers after 60 s and
// the deadline is 50 ms; each decision comes back while the stall lasts
// (it did not wait for Redis's reply), as a timeout, and fails open.
func TestDecide_ContextTimeoutBoundsSlowRedis(t *testing.T) {
	t.Parallel()
	redisURL := servicetest.RedisURL(t)
	p, addr := faultProxy(t, strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0"))
	prefix := servicetest.KeyPrefix(t)
	rdb := newRedis(t, "redis://"+addr+"/0")
	t.Cleanup(func() { checkTTLsAndClean(t, newRedis(t, redisURL), prefix) })
	// allow (FailOpen): what this test asserts is every late call failing
	// open. Under the default, warm-up calls that time out on a loaded
	// machine (-parallel 16 saw it) spend the fail-open budget or open the
	// breaker, and the next decisions are then made in process, as
	// designed (TestFault_SlowStoreFloodIsHeldToTheLocalLimitsOnEveryRule).
	cfg := faultConfig(50 * time.Millisecond)
	cfg.OnStoreError = FailOpen
	l, reg := newTestLimiter(t, cfg, keyspace.MustNew(prefix), NewRedisStore(rdb))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	waitAllowed(t, l, s, warmUpWithin) // warm-up: dial, script load
	const stall = 60 * time.Second
	addToxic(t, p, `{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":60000}}`)
	stalled := time.Now()
	for i := range 3 {
		v := decideWithin(t, l, s, stall-time.Since(stalled))
		if v.Decisions[0].Outcome != OutcomeError {
			t.Fatalf("slow request %d: %s, want error (fail-open)", i, outcomes(v))
		}
	}
	if got := counterValue(t, reg, "borda_ratelimit_store_errors_total", map[string]string{"reason": "timeout"}); got < 3 {
		t.Fatalf("timeouts counted = %v, want 3", got)
	}
}

// decideWithin runs l.Decide and fails the test unless it returns within
// d: a stall's remaining length, so a return proves the decision did not
// wait for the stalled store.
func decideWithin(t *testing.T, l *Limiter, s Subject, d time.Duration) Verdict {
	t.Helper()
	done := make(chan Verdict, 1)
	go func() { done <- l.Decide(context.Background(), s) }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("the decision waited for the stalled store (%v)", d)
		return Verdict{}
	}
}

// TestFault_ConnectionResetFailsOpen: the proxy resets every connection;
// decisions fail open quickly (on_store_error: allow) and the breaker
// opens.
func TestFault_ConnectionResetFailsOpen(t *testing.T) {
	t.Parallel()
	redisURL := servicetest.RedisURL(t)
	p, addr := faultProxy(t, strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0"))
	prefix := servicetest.KeyPrefix(t)
	rdb := newRedis(t, "redis://"+addr+"/0")
	t.Cleanup(func() { checkTTLsAndClean(t, newRedis(t, redisURL), prefix) })
	cfg := faultConfig(30 * time.Millisecond)
	cfg.OnStoreError = FailOpen // with the breaker open too: the recovery below is the store's
	l, reg := newTestLimiter(t, cfg, keyspace.MustNew(prefix), NewRedisStore(rdb))
	l.Start(context.Background())
	defer l.Stop(context.Background())
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	waitAllowed(t, l, s, warmUpWithin)
	addToxic(t, p, `{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`)
	for range 20 {
		v := l.Decide(context.Background(), s)
		if v.Blocked() || v.Decisions[0].Outcome != OutcomeError {
			t.Fatalf("reset: %s", outcomes(v))
		}
	}
	if got := counterValue(t, reg, "borda_ratelimit_store_errors_total", map[string]string{"reason": "breaker_open"}); got < 1 {
		t.Fatal("breaker never opened under connection resets")
	}
	if err := p.Toxics.RemoveToxic(context.Background(), "reset"); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, l, s, 5*time.Second)
}

// TestDecide_StoppedRedisBoundedLatencyAndRecovery: a private
// redis-server is frozen with SIGSTOP while 100 concurrent requests run;
// each answers within the deadline plus a margin (fail-open, counted), the
// breaker opens (on_store_error: allow: it fails open too), and after SIGCONT decisions come from Redis again within
// 5 s.
func TestDecide_StoppedRedisBoundedLatencyAndRecovery(t *testing.T) {
	t.Parallel()
	addr, pid := privateRedis(t)
	rdb := newRedis(t, "redis://"+addr+"/0")
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	cfg := faultConfig(30 * time.Millisecond)
	cfg.OnStoreError = FailOpen // with the breaker open too: the recovery below is the store's
	l, reg := newTestLimiter(t, cfg, ks, NewRedisStore(rdb))
	l.Start(context.Background())
	defer l.Stop(context.Background())
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	waitAllowed(t, l, s, warmUpWithin) // warm-up: dial, script load
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	// Redis stays stopped until every decision below has returned: each
	// came back without its reply.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lat []time.Duration
	for range 100 {
		wg.Go(func() {
			start := time.Now()
			v := l.Decide(context.Background(), s)
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, took)
			if v.Blocked() || v.Decisions[0].Outcome != OutcomeError {
				t.Errorf("stopped redis: %s", outcomes(v))
			}
		})
	}
	returned := make(chan struct{})
	go func() { wg.Wait(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("decisions waited for the stopped Redis (30 s)")
	}
	if got := decisionCount(t, reg, "burst", OutcomeError); got < 100 {
		t.Fatalf("fail-open decisions counted = %v, want 100", got)
	}
	slices.Sort(lat)
	t.Logf("redis stopped, 100 concurrent: p50 %v p99 %v max %v", lat[49], lat[98], lat[99])
	// With the breaker open a decision does not ask the store: of 1 000
	// sequential decisions, every one is refused by the breaker except
	// its half-open probes, at most one per open period.
	reasons := func() (open, asked float64) {
		for _, r := range []string{"timeout", "error"} {
			asked += counterValue(t, reg, "borda_ratelimit_store_errors_total", map[string]string{"reason": r})
		}
		return counterValue(t, reg, "borda_ratelimit_store_errors_total", map[string]string{"reason": "breaker_open"}), asked
	}
	open0, asked0 := reasons()
	start := time.Now()
	for range 1000 {
		l.Decide(context.Background(), s)
	}
	elapsed := time.Since(start)
	open1, asked1 := reasons()
	probes := asked1 - asked0
	t.Logf("breaker open, 1000 sequential in %v: %v refused by the breaker, %v probes", elapsed, open1-open0, probes)
	if open1-open0+probes != 1000 || probes > 1+float64(elapsed/cfg.BreakerOpenFor) {
		t.Errorf("breaker open: %v refused by the breaker and %v asked the store in %v, want every decision but one probe per %v refused", open1-open0, probes, elapsed, cfg.BreakerOpenFor)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	back := time.Now()
	waitAllowed(t, l, s, 5*time.Second)
	t.Logf("recovered %v after SIGCONT", time.Since(back))
}

// warmUpWithin bounds a fault test's warm-up (dial, script load) before
// its fault: a first allow under the test's 30-50 ms store timeout. It is
// no latency claim, so it is wide: a loaded machine (-parallel 16 beside a
// mutation run) saw every call time out for 3 s.
const warmUpWithin = 15 * time.Second

func waitAllowed(t *testing.T, l *Limiter, s Subject, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := l.Decide(context.Background(), s)
		if v.Decisions[0].Outcome == OutcomeAllow {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery within %v: %s", within, outcomes(v))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBreakerOpen_OnStoreErrorLocalStillLimitsIPs(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(burstRule(3, 5*time.Second))
	cfg.OnStoreError = LocalIP
	cfg.BreakerFailures, cfg.BreakerOpenFor = 1, time.Minute
	store := &countingStore{Store: NewMemoryStore(0)}
	store.fail.Store(true)
	l, _ := newTestLimiter(t, cfg, testKS, store)
	l.Start(context.Background())
	defer l.Stop(context.Background())
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	var v Verdict
	for range 4 {
		v = l.Decide(context.Background(), s)
	}
	if !v.Blocked() || store.hits.Load() != 1 {
		t.Fatalf("breaker open, local: %s after %d store calls", outcomes(v), store.hits.Load())
	}
}

// hangingStore ignores its context for d, as a client library stuck in a
// handshake or pool wait would.
type hangingStore struct {
	Store
	release chan struct{} // closed by the test: every Hit returns
	entered chan struct{} // one send per Hit that started
}

func (s *hangingStore) Hit(context.Context, []Hit, []Count) (time.Time, error) {
	s.entered <- struct{}{}
	<-s.release
	return time.Now(), nil
}

// A store that overruns its context must not hold the request past
// rate_limits.timeout: each decision returns while the store still holds
// its call, as an error (fail-open), and the goroutine waiting on the
// store ends when the store returns.
func TestDecide_StoreIgnoringContextAnswersByTimeout(t *testing.T) {
	store := &hangingStore{Store: NewMemoryStore(1), release: make(chan struct{}), entered: make(chan struct{}, 5)}
	released := false
	defer func() {
		if !released {
			close(store.release)
		}
	}()
	cfg := rulesConfig(burstRule(5, 5*time.Second))
	cfg.BreakerFailures = 1000
	l, _ := newTestLimiter(t, cfg, testKS, store)
	before := runtime.NumGoroutine()
	for i := range 5 {
		v := decideWithin(t, l, Subject{Route: "portal", IP: "203.0.113.5"}, 30*time.Second)
		if v.Blocked() || v.Decisions[0].Outcome != OutcomeError {
			t.Fatalf("request %d: %s, want error (fail-open)", i, outcomes(v))
		}
		select {
		case <-store.entered: // the store held this call while the decision returned
		default:
			t.Fatalf("request %d: decided without calling the store", i)
		}
	}
	close(store.release)
	released = true
	if !eventuallyTrue(5*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		t.Fatalf("goroutines %d after the store returned, %d before", runtime.NumGoroutine(), before)
	}
}

func eventuallyTrue(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// A flood with Redis slowed past the deadline (500 ms of latency behind a
// toxiproxy, deadline 30 ms) trips the breaker; with on_store_error: local
// every rule, not only the ip ones, is held to its limit in process: the
// load that slowed the store does not switch limiting off.
func TestFault_SlowStoreFloodIsHeldToTheLocalLimitsOnEveryRule(t *testing.T) {
	t.Parallel()
	redisURL := servicetest.RedisURL(t)
	p, addr := faultProxy(t, strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0"))
	prefix := servicetest.KeyPrefix(t)
	rdb := newRedis(t, "redis://"+addr+"/0")
	t.Cleanup(func() { checkTTLsAndClean(t, newRedis(t, redisURL), prefix) })
	const limit = 20
	cfg := rulesConfig(
		Rule{Name: "ip", Scope: ScopeIP, Limit: limit, Window: time.Minute, Routes: []string{"*"}},
		Rule{Name: "user", Scope: ScopeUser, Limit: limit, Window: time.Minute, Routes: []string{"*"}},
		Rule{Name: "route", Scope: ScopeRoute, Algorithm: GCRA, Limit: limit, Window: time.Minute, Routes: []string{"*"}})
	cfg.OnStoreError = LocalIP
	cfg.BreakerFailures, cfg.BreakerOpenFor = 3, time.Minute
	l, reg := newTestLimiter(t, cfg, keyspace.MustNew(prefix), NewRedisStore(rdb))
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	waitAllowed(t, l, Subject{Route: "warm", IP: "198.51.100.1", User: "warm"}, warmUpWithin)
	addToxic(t, p, `{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":500}}`)
	// 200 client addresses, one user and one route: the user and route
	// rules see the whole flood.
	passed := map[string]int{}
	for i := range 400 {
		v := l.Decide(context.Background(), Subject{Route: "portal", IP: fmt.Sprintf("203.0.113.%d", i%200), User: "u-flood"})
		for _, d := range v.Decisions {
			if d.Outcome == OutcomeError {
				t.Fatalf("request %d: rule %s failed open", i, d.Rule)
			}
			if d.Outcome == OutcomeAllow {
				passed[d.Rule]++
			}
		}
	}
	t.Logf("passed per rule with the store past its deadline: %v", passed)
	if passed["user"] > limit || passed["route"] > limit {
		t.Fatalf("passed %v, want the user and route rules held to %d", passed, limit)
	}
	if got := counterValue(t, reg, "borda_ratelimit_store_errors_total", map[string]string{"reason": "breaker_open"}); got == 0 {
		t.Fatal("the breaker never opened: the flood did not reach the degraded path")
	}
}

// Fresh attack pass 8 R01: 20 concurrent requests whose store calls all
// passed the deadline at once (a cold pool dialling a remote store) each
// failed open, 20 of a limit of 1, before the breaker could count its 5
// failures. Under local_while_open a failed call's pass is a budget of
// breaker.failures until the store answers again; the requests past it
// are decided in process. Every algorithm, 20 at once: at most the
// budget plus the limit pass.
func TestFailedCallsInFlightAtOnceSpendOneFailOpenBudget(t *testing.T) {
	t.Parallel()
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			store := &hangingStore{Store: NewMemoryStore(1), release: make(chan struct{}), entered: make(chan struct{}, 64)}
			defer close(store.release)
			rule := burstRule(1, time.Minute)
			rule.Algorithm = alg
			cfg := rulesConfig(rule)
			cfg.BreakerFailures, cfg.BreakerOpenFor = 5, time.Hour
			l, _ := newTestLimiter(t, cfg, testKS, store)
			var passed atomic.Int64
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() {
					if !l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.77"}).Blocked() {
						passed.Add(1)
					}
				})
			}
			wg.Wait()
			if got, most := passed.Load(), int64(cfg.BreakerFailures)+1; got > most {
				t.Errorf("%d of 20 concurrent requests passed a limit of 1 with the store timing out, want ≤ %d (the fail-open budget and the limit)", got, most)
			}
		})
	}
}
