package ratelimit

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
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

// TestDecide_ContextTimeoutBoundsSlowRedis: 500 ms of latency on Redis
// and a 50 ms deadline; each decision returns near 50 ms, not 500 ms, and
// fails open.
func TestDecide_ContextTimeoutBoundsSlowRedis(t *testing.T) {
	t.Parallel()
	redisURL := servicetest.RedisURL(t)
	p, addr := faultProxy(t, strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0"))
	prefix := servicetest.KeyPrefix(t)
	rdb := newRedis(t, "redis://"+addr+"/0")
	t.Cleanup(func() { checkTTLsAndClean(t, newRedis(t, redisURL), prefix) })
	l, reg := newTestLimiter(t, faultConfig(50*time.Millisecond), keyspace.MustNew(prefix), NewRedisStore(rdb))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	waitAllowed(t, l, s, 3*time.Second) // warm-up: dial, script load
	addToxic(t, p, `{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":500}}`)
	for i := range 3 {
		start := time.Now()
		v := l.Decide(context.Background(), s)
		took := time.Since(start)
		if v.Decisions[0].Outcome != OutcomeError {
			t.Fatalf("slow request %d: %s, want error (fail-open)", i, outcomes(v))
		}
		if took > 250*time.Millisecond {
			t.Fatalf("slow request %d took %v with a 50ms deadline", i, took)
		}
	}
	if got := counterValue(t, reg, "borda_ratelimit_store_errors_total", map[string]string{"reason": "timeout"}); got < 3 {
		t.Fatalf("timeouts counted = %v, want 3", got)
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
	waitAllowed(t, l, s, 3*time.Second)
	addToxic(t, p, `{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`)
	for range 20 {
		start := time.Now()
		v := l.Decide(context.Background(), s)
		if v.Blocked() || v.Decisions[0].Outcome != OutcomeError {
			t.Fatalf("reset: %s", outcomes(v))
		}
		if took := time.Since(start); took > 200*time.Millisecond {
			t.Fatalf("reset decision took %v", took)
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
	waitAllowed(t, l, s, 3*time.Second) // warm-up: dial, script load
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	var lat []time.Duration
	for range 100 {
		wg.Go(func() {
			start := time.Now()
			v := l.Decide(context.Background(), s)
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			worst = max(worst, took)
			lat = append(lat, took)
			if v.Blocked() || v.Decisions[0].Outcome != OutcomeError {
				t.Errorf("stopped redis: %s", outcomes(v))
			}
		})
	}
	wg.Wait()
	if worst > 500*time.Millisecond {
		t.Fatalf("worst decision with redis stopped took %v (deadline 30ms)", worst)
	}
	if got := decisionCount(t, reg, "burst", OutcomeError); got < 100 {
		t.Fatalf("fail-open decisions counted = %v, want 100", got)
	}
	slices.Sort(lat)
	t.Logf("redis stopped, 100 concurrent: p50 %v p99 %v max %v", lat[49], lat[98], lat[99])
	open := make([]time.Duration, 1000)
	for i := range open {
		start := time.Now()
		l.Decide(context.Background(), s)
		open[i] = time.Since(start)
	}
	slices.Sort(open)
	t.Logf("breaker open, 1000 sequential: p50 %v p99 %v max %v", open[499], open[989], open[999])
	if open[989] > 5*time.Millisecond {
		t.Errorf("p99 decision with the breaker open took %v", open[989])
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	back := time.Now()
	waitAllowed(t, l, s, 5*time.Second)
	t.Logf("recovered %v after SIGCONT", time.Since(back))
}

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
	d time.Duration
}

func (s *hangingStore) Hit(context.Context, []Hit, []Count) (time.Time, error) {
	time.Sleep(s.d)
	return time.Now(), nil
}

// A store that overruns its context must not hold the request past
// rate_limits.timeout, and its goroutine ends when the store returns.
func TestDecide_StoreIgnoringContextAnswersByTimeout(t *testing.T) {
	store := &hangingStore{Store: NewMemoryStore(1), d: 300 * time.Millisecond}
	cfg := rulesConfig(burstRule(5, 5*time.Second))
	cfg.BreakerFailures = 1000
	l, _ := newTestLimiter(t, cfg, testKS, store)
	before := runtime.NumGoroutine()
	for i := range 5 {
		start := time.Now()
		v := l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.5"})
		if el := time.Since(start); el > cfg.Timeout+50*time.Millisecond {
			t.Fatalf("request %d waited %v with timeout %v", i, el, cfg.Timeout)
		}
		if v.Blocked() || v.Decisions[0].Outcome != OutcomeError {
			t.Fatalf("request %d: %s, want error (fail-open)", i, outcomes(v))
		}
	}
	if !eventuallyTrue(2*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
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
	waitAllowed(t, l, Subject{Route: "warm", IP: "198.51.100.1", User: "warm"}, 3*time.Second)
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
