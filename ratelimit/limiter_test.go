package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/keyspace"
)

var testKS = keyspace.MustNew("olp-dev:unit:")

func decisionCount(t *testing.T, reg *prometheus.Registry, rule string, o Outcome) float64 {
	t.Helper()
	return counterValue(t, reg, "borda_ratelimit_decisions_total", map[string]string{"rule": rule, "decision": string(o)})
}

// counterValue reads one counter series from reg (0 when absent).
func counterValue(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			match := true
			for k, v := range want {
				match = match && labels[k] == v
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func outcomes(v Verdict) string {
	var b strings.Builder
	for i, d := range v.Decisions {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d.Rule + "=" + string(d.Outcome))
	}
	return b.String()
}

func TestDecide_EnforceBlocksAfterLimit(t *testing.T) {
	t.Parallel()
	l, reg := newTestLimiter(t, rulesConfig(burstRule(5, 5*time.Second)), testKS, NewMemoryStore(0))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	for i := 1; i <= 5; i++ {
		v := l.Decide(context.Background(), s)
		if v.Blocked() || v.Decisions[0].Remaining != int64(5-i) {
			t.Fatalf("request %d: %s remaining %d", i, outcomes(v), v.Decisions[0].Remaining)
		}
	}
	v := l.Decide(context.Background(), s)
	if !v.Blocked() {
		t.Fatalf("6th request: %s, want block", outcomes(v))
	}
	d := v.Decisions[0]
	if d.RetryAfter <= 0 || d.RetryAfter > 5*time.Second || !strings.Contains(d.Message, "segundos") || strings.Contains(d.Message, "{retry_after}") {
		t.Fatalf("block decision = %+v", d)
	}
	if other := l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.10"}); other.Blocked() {
		t.Fatal("another IP is blocked too")
	}
	if got := decisionCount(t, reg, "burst", OutcomeBlock); got != 1 {
		t.Fatalf("block count = %v", got)
	}
	if got := decisionCount(t, reg, "burst", OutcomeAllow); got != 6 {
		t.Fatalf("allow count = %v", got)
	}
}

func TestDecide_NoRuleCostsNoStoreCall(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(Rule{Name: "burst", Scope: ScopeIP, Limit: 5, Window: 5 * time.Second, Routes: []string{"api"}})
	store := &countingStore{Store: NewMemoryStore(0)}
	l, _ := newTestLimiter(t, cfg, testKS, store)
	v := l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.9"})
	if len(v.Decisions) != 0 || store.hits.Load() != 0 {
		t.Fatalf("route without rules: %d decisions, %d store calls", len(v.Decisions), store.hits.Load())
	}
	l.Decide(context.Background(), Subject{Route: "api", IP: "203.0.113.9"})
	if store.hits.Load() != 1 {
		t.Fatalf("route with a rule: %d store calls, want 1", store.hits.Load())
	}
}

func TestDecide_RouteNamesRule(t *testing.T) {
	t.Parallel()
	// routes[portal].rate_limits: [burst] reaches the rule as its Routes.
	cfg := rulesConfig(Rule{Name: "burst", Scope: ScopeIP, Limit: 5, Window: 5 * time.Second, Routes: []string{"portal"}})
	l, err := New(cfg, testKS, NewMemoryStore(0), prometheus.NewRegistry(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if v := l.Decide(context.Background(), Subject{Route: "portal", IP: "192.0.2.1"}); len(v.Decisions) != 1 {
		t.Fatalf("portal: %s", outcomes(v))
	}
	if v := l.Decide(context.Background(), Subject{Route: "api", IP: "192.0.2.1"}); len(v.Decisions) != 0 {
		t.Fatalf("api: %s", outcomes(v))
	}
}

func TestDecide_ObserveModePassesAndCounts(t *testing.T) {
	t.Parallel()
	r := burstRule(2, 5*time.Second)
	r.Mode = Observe
	l, reg := newTestLimiter(t, rulesConfig(r), testKS, NewMemoryStore(0))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	var v Verdict
	for range 3 {
		v = l.Decide(context.Background(), s)
	}
	if v.Blocked() || !v.WouldBlock() {
		t.Fatalf("3rd request: %s, want would_block only", outcomes(v))
	}
	if got := decisionCount(t, reg, "burst", OutcomeWouldBlock); got != 1 {
		t.Fatalf("would_block count = %v", got)
	}
}

func TestDecide_ObserveLimitBelowEnforcedLimit(t *testing.T) {
	t.Parallel()
	r := burstRule(5, 5*time.Second)
	r.ObserveLimit = 2
	l, _ := newTestLimiter(t, rulesConfig(r), testKS, NewMemoryStore(0))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	want := []Outcome{OutcomeAllow, OutcomeAllow, OutcomeWouldBlock, OutcomeWouldBlock, OutcomeWouldBlock, OutcomeBlock}
	for i, w := range want {
		if got := l.Decide(context.Background(), s).Decisions[0].Outcome; got != w {
			t.Fatalf("request %d: %s, want %s", i+1, got, w)
		}
	}
}

func TestDecide_NoIdentitySkipsUserAndEscolaRules(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(
		burstRule(50, 5*time.Second),
		Rule{Name: "api", Scope: ScopeUser, Limit: 100, Window: time.Minute, Routes: []string{"*"}},
		Rule{Name: "escola", Scope: ScopeEscola, Limit: 1000, Window: time.Minute, Routes: []string{"*"}},
	)
	l, reg := newTestLimiter(t, cfg, testKS, NewMemoryStore(0))
	v := l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.9"})
	if got := outcomes(v); got != "burst=allow,api=skip,escola=skip" {
		t.Fatalf("outcomes = %s", got)
	}
	if decisionCount(t, reg, "api", OutcomeSkip) != 1 || decisionCount(t, reg, "escola", OutcomeSkip) != 1 {
		t.Fatal("skips not counted")
	}
	v = l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.9", User: "u-1", Escola: "e-1"})
	if got := outcomes(v); got != "burst=allow,api=allow,escola=allow" {
		t.Fatalf("with identity: %s", got)
	}
}

func TestDecide_ModeOffNeverApplies(t *testing.T) {
	t.Parallel()
	r := burstRule(1, 5*time.Second)
	r.Mode = Off
	store := &countingStore{Store: NewMemoryStore(0)}
	l, _ := newTestLimiter(t, rulesConfig(r), testKS, store)
	for range 3 {
		if v := l.Decide(context.Background(), Subject{Route: "portal", IP: "192.0.2.1"}); len(v.Decisions) != 0 {
			t.Fatalf("off rule decided: %s", outcomes(v))
		}
	}
	if store.hits.Load() != 0 {
		t.Fatal("off rule called the store")
	}
}

func TestDecide_DenyCacheRefusesWithoutStoreCall(t *testing.T) {
	t.Parallel()
	store := &countingStore{Store: NewMemoryStore(0)}
	l, _ := newTestLimiter(t, rulesConfig(burstRule(2, 5*time.Second)), testKS, store)
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	for range 3 {
		l.Decide(context.Background(), s)
	}
	calls := store.hits.Load()
	for range 100 {
		v := l.Decide(context.Background(), s)
		if !v.Blocked() || v.RetryAfterSeconds() < 1 {
			t.Fatalf("cached deny: %s retry %d", outcomes(v), v.RetryAfterSeconds())
		}
	}
	if store.hits.Load() != calls {
		t.Fatalf("deny cache: %d store calls for 100 refused requests", store.hits.Load()-calls)
	}
}

func TestDecide_StoreErrorFailsOpen(t *testing.T) {
	t.Parallel()
	store := &countingStore{Store: NewMemoryStore(0)}
	store.fail.Store(true)
	l, reg := newTestLimiter(t, rulesConfig(burstRule(1, 5*time.Second)), testKS, store)
	for range 3 {
		v := l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.9"})
		if v.Blocked() || v.Decisions[0].Outcome != OutcomeError {
			t.Fatalf("failing store: %s", outcomes(v))
		}
	}
	if got := decisionCount(t, reg, "burst", OutcomeError); got != 3 {
		t.Fatalf("error count = %v", got)
	}
	if got := counterValue(t, reg, "borda_ratelimit_store_errors_total", map[string]string{"reason": "error"}); got != 3 {
		t.Fatalf("store errors = %v", got)
	}
}

func TestDecide_OnStoreErrorLocalKeepsEveryRulesLimit(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(burstRule(3, 5*time.Second),
		Rule{Name: "api", Scope: ScopeUser, Limit: 1, Window: time.Minute, Routes: []string{"*"}})
	cfg.OnStoreError = LocalIP
	store := &countingStore{Store: NewMemoryStore(0)}
	store.fail.Store(true)
	l, _ := newTestLimiter(t, cfg, testKS, store)
	s := Subject{Route: "portal", IP: "203.0.113.9", User: "u-1"}
	var v Verdict
	for range 4 {
		v = l.Decide(context.Background(), s)
	}
	if got := outcomes(v); got != "api=block" { // refused from the deny cache: only the refusing rule
		t.Fatalf("4th request with the store down: %s", got)
	}
}

func TestBreaker_OpensStopsCallingAndRecoversOffRequestPath(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(burstRule(100, 5*time.Second))
	cfg.BreakerFailures, cfg.BreakerOpenFor = 3, 200*time.Millisecond
	cfg.OnStoreError = FailOpen // an allow below comes from the store, not from the local limits
	store := &countingStore{Store: NewMemoryStore(0)}
	l, _ := newTestLimiter(t, cfg, testKS, store)
	l.memory = false // exercise the breaker around a store that can fail
	l.Start(context.Background())
	defer l.Stop(context.Background())
	store.fail.Store(true)
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	for range 10 {
		l.Decide(context.Background(), s)
	}
	if got := store.hits.Load(); got != 3 {
		t.Fatalf("store calls with the breaker open = %d, want 3 (the failures that opened it)", got)
	}
	store.fail.Store(false)
	deadline := time.Now().Add(3 * time.Second)
	for l.Decide(context.Background(), s).Decisions[0].Outcome != OutcomeAllow {
		if time.Now().After(deadline) {
			t.Fatal("breaker did not close after the store recovered")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRelax_RaisesLimitAndExpires(t *testing.T) {
	t.Parallel()
	// one driven clock for the store and the limiter: the relax expires
	// without sleeping
	var mu sync.Mutex
	virt := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return virt }
	store := NewMemoryStore(0)
	store.SetClock(clockFunc(clock))
	l, err := New(withClock(rulesConfig(burstRule(2, 5*time.Second)), clock), testKS, store, prometheus.NewRegistry(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := Relax(ctx, store, testKS, "burst", 2, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := store.WriteRelax(ctx, testKS.Relax("other"), 0.1, time.Minute); err != nil {
		t.Fatal(err)
	}
	l.pollRelax(ctx)
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	for i := 1; i <= 4; i++ {
		v := l.Decide(ctx, s)
		if v.Blocked() || v.Decisions[0].Limit != 4 {
			t.Fatalf("relaxed request %d: %s limit %d", i, outcomes(v), v.Decisions[0].Limit)
		}
	}
	if !l.Decide(ctx, s).Blocked() {
		t.Fatal("5th request passed a relaxed limit of 4")
	}
	mu.Lock()
	virt = virt.Add(300 * time.Millisecond)
	mu.Unlock()
	if v := l.Decide(ctx, Subject{Route: "portal", IP: "192.0.2.50"}); v.Decisions[0].Limit != 2 {
		t.Fatalf("after expiry limit = %d, want 2", v.Decisions[0].Limit)
	}
}

func TestReload_BadRulesKeepTheOldOnes(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(t, rulesConfig(burstRule(1, 5*time.Second)), testKS, NewMemoryStore(0))
	s := Subject{Route: "portal", IP: "203.0.113.9"}
	l.Decide(context.Background(), s)
	if !l.Decide(context.Background(), s).Blocked() {
		t.Fatal("limit 1 did not block the 2nd request")
	}
	// The file's bad rules are refused by configs naming each field
	// (configs TestValidateRateLimitsNamesEveryBadRuleField); a typed value
	// the Limiter cannot work with is refused here too.
	for _, bad := range []Rule{
		{Name: "burst", Scope: Scope(9), Limit: 5, Window: time.Second},
		{Name: "burst", Scope: ScopeIP, Limit: 0, Window: time.Second},
		{Name: "burst", Scope: ScopeIP, Limit: 5, Window: 0},
		{Name: "burst", Scope: ScopeIP, Algorithm: Algorithm(9), Limit: 5, Window: time.Second},
		{Name: "burst", Scope: ScopeIP, Mode: Mode(9), Limit: 5, Window: time.Second},
		{Scope: ScopeIP, Limit: 5, Window: time.Second},
	} {
		if err := l.Reload([]Rule{bad}); err == nil {
			t.Fatalf("reload of %+v accepted", bad)
		}
	}
	if !l.Decide(context.Background(), s).Blocked() {
		t.Fatal("old rules lost after a bad reload")
	}
	if err := l.Reload(rulesConfig(burstRule(100, 5*time.Second)).Rules); err != nil {
		t.Fatal(err)
	}
	if v := l.Decide(context.Background(), s); v.Blocked() || v.Decisions[0].Limit != 100 {
		t.Fatalf("after reload: %s limit %d", outcomes(v), v.Decisions[0].Limit)
	}
}

func TestNew_SharesMetricsAcrossLimitersOnOneRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := redisCommands(reg); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := New(rulesConfig(burstRule(1, time.Second)), testKS, NewMemoryStore(0), reg, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNew_RefusesANonPositiveTimeoutOrRelaxPoll: the two have one default,
// the configuration's (rate_limits.timeout, rate_limits.relax_poll); a
// Limiter built by hand without them is refused, not given a second copy.
func TestNew_RefusesANonPositiveTimeoutOrRelaxPoll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ timeout, relax time.Duration }{{0, time.Second}, {time.Second, 0}, {-time.Millisecond, time.Second}} {
		opts := rulesConfig(burstRule(1, time.Second))
		opts.Timeout, opts.RelaxPoll = tc.timeout, tc.relax
		if _, err := New(opts, testKS, NewMemoryStore(0), prometheus.NewRegistry(), nil); err == nil {
			t.Errorf("New with Timeout %s, RelaxPoll %s: no error", tc.timeout, tc.relax)
		}
	}
}

func TestReload_ConcurrentWithDecide(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(t, rulesConfig(burstRule(1000, 5*time.Second)), testKS, NewMemoryStore(0))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				l.Decide(context.Background(), Subject{Route: "portal", IP: "192.0.2." + strconv.Itoa(g), User: strconv.Itoa(i)})
			}
		})
	}
	for i := range 50 {
		cfg := rulesConfig(burstRule(int64(1000+i), 5*time.Second),
			Rule{Name: "api", Scope: ScopeUser, Limit: 10, Window: time.Minute, Routes: []string{"*"}})
		if err := l.Reload(cfg.Rules); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// After a reload shortens a rule's window, a subject blocked under the old
// window must not stay blocked (by the store's TTL or the deny cache)
// longer than the new window.
func TestReload_ShorterWindowNeverBlocksLongerThanIt(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore(0)
	l, _ := newTestLimiter(t, rulesConfig(burstRule(1, time.Hour)), testKS, store)
	ctx := context.Background()
	s := Subject{Route: "portal", IP: "203.0.113.66"}
	l.Decide(ctx, s)
	if err := l.Reload(rulesConfig(burstRule(1, time.Second)).Rules); err != nil {
		t.Fatal(err)
	}
	v := l.Decide(ctx, s)
	if !v.Blocked() {
		return // the old count was forgotten: fine
	}
	if ra := v.Decisions[0].RetryAfter; ra > time.Second {
		t.Fatalf("blocked for %v under a 1s window", ra)
	}
}
