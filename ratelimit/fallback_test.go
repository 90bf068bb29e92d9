package ratelimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/breaker"
)

// degradedRules is one rule per scope and algorithm, limit 3 per minute,
// each on a route of its own (named after the rule), and a "trip" rule on
// route "trip" whose failures open the breaker.
func degradedRules() []Rule {
	rules := []Rule{{Name: "trip", Scope: ScopeIP, Limit: 1000, Window: time.Minute, Routes: []string{"trip"}}}
	for _, sc := range []Scope{ScopeIP, ScopeUser, ScopeEscola, ScopeRoute} {
		for _, alg := range []Algorithm{FixedWindow, SlidingWindow, GCRA} {
			name := sc.String() + "-" + alg.String()
			rules = append(rules, Rule{Name: name, Scope: sc, Algorithm: alg, Limit: 3, Window: time.Minute, Routes: []string{name}})
		}
	}
	return rules
}

// tripBreaker sends failures requests to the trip route of a Limiter whose
// store fails, each answered OutcomeError (a single failed call fails
// open, design.md §4), and fails the test unless the breaker is open
// after them.
func tripBreaker(t *testing.T, l *Limiter, failures int) {
	t.Helper()
	for i := range failures {
		v := l.Decide(context.Background(), Subject{Route: "trip", IP: "198.51.100.1"})
		if got := outcomes(v); got != "trip=error" {
			t.Fatalf("failed call %d before the breaker opened: %s, want trip=error (fail-open)", i, got)
		}
	}
	if st := l.breaker.State(); st != breaker.StateOpen {
		t.Fatalf("the breaker is %v after %d failures, want open", st, failures)
	}
}

// The default (local_while_open), issue 27 item 3: once sustained failure
// opens the breaker, every rule (each scope, each algorithm) is held to its
// own limit in process, and the store is not asked; before that, each
// failed call let its request through.
func TestBreakerOpen_DefaultHoldsEveryRuleToItsLocalLimit(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(degradedRules()...)
	cfg.BreakerFailures, cfg.BreakerOpenFor = 2, time.Hour
	if cfg.OnStoreError != LocalWhileOpen {
		t.Fatalf("zero Options.OnStoreError = %v, want local_while_open", cfg.OnStoreError)
	}
	store := &countingStore{Store: NewMemoryStore(0)}
	store.fail.Store(true)
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC) // held: GCRA and sliding windows refill on time only
	l, err := New(withClock(cfg, func() time.Time { return now }), testKS, store, prometheus.NewRegistry(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	tripBreaker(t, l, 2)
	asked := store.hits.Load()
	for _, r := range degradedRules()[1:] {
		t.Run(r.Name, func(t *testing.T) {
			s := Subject{Route: r.Name, IP: "203.0.113.9", User: "u-1", Escola: "e-1"}
			for i := 1; i <= 5; i++ {
				v := l.Decide(context.Background(), s)
				want := r.Name + "=allow"
				if i > 3 {
					want = r.Name + "=block"
				}
				if got := outcomes(v); got != want {
					t.Fatalf("request %d with the breaker open: %s, want %s", i, got, want)
				}
			}
		})
	}
	if got := store.hits.Load(); got != asked {
		t.Fatalf("the store was asked %d times with the breaker open", got-asked)
	}
}

// on_store_error: allow keeps the behaviour before local_while_open became
// the default: with the breaker open every rule fails open.
func TestBreakerOpen_AllowFailsEveryRuleOpen(t *testing.T) {
	t.Parallel()
	cfg := rulesConfig(degradedRules()...)
	cfg.BreakerFailures, cfg.BreakerOpenFor = 2, time.Hour
	cfg.OnStoreError = FailOpen
	store := &countingStore{Store: NewMemoryStore(0)}
	store.fail.Store(true)
	l, _ := newTestLimiter(t, cfg, testKS, store)
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	tripBreaker(t, l, 2)
	for _, r := range degradedRules()[1:] {
		s := Subject{Route: r.Name, IP: "203.0.113.9", User: "u-1", Escola: "e-1"}
		for i := range 5 {
			if got := outcomes(l.Decide(context.Background(), s)); got != r.Name+"=error" {
				t.Fatalf("%s request %d with the breaker open: %s, want error (allow fails open)", r.Name, i, got)
			}
		}
	}
}

// Each Fallback decides locally exactly where docs/rate-limiting.md says:
// local on every failure, local_while_open only when the breaker refused
// the call, allow never.
func TestFallback_DecidesLocallyOnlyWhereItSays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f             Fallback
		name          string
		failed, whole bool // a failed call; the breaker open
	}{
		{LocalWhileOpen, "local_while_open", false, true},
		{FailOpen, "allow", false, false},
		{LocalIP, "local", true, true},
	} {
		if tc.f.String() != tc.name {
			t.Errorf("Fallback %d is named %q, want %q", tc.f, tc.f.String(), tc.name)
		}
		if got := tc.f.decidesLocally(false); got != tc.failed {
			t.Errorf("%s decides a failed call locally: %v, want %v", tc.name, got, tc.failed)
		}
		if got := tc.f.decidesLocally(true); got != tc.whole {
			t.Errorf("%s decides locally with the breaker open: %v, want %v", tc.name, got, tc.whole)
		}
	}
	if _, err := New(Options{Rules: degradedRules(), OnStoreError: LocalIP + 1}, testKS, NewMemoryStore(0), prometheus.NewRegistry(), nil); err == nil {
		t.Error("New accepted an unknown Fallback")
	}
}

// Fresh attack pass 8 (low): under on_store_error: local_while_open the
// breaker's opening said "requests pass without a decision (fail-open)",
// while every rule held its per-instance limit. The line says what the
// mode does.
func TestBreakerOpenedLineSaysWhatTheModeDoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f    Fallback
		want string
	}{
		{LocalWhileOpen, "this instance's own counts"},
		{FailOpen, "fail-open"},
	} {
		if got := breakerOpenedMsg(tc.f.decidesLocally(true)); !strings.Contains(got, tc.want) {
			t.Errorf("%v: %q, want it to say %q", tc.f, got, tc.want)
		}
	}
}
