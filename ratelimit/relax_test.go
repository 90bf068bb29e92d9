package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// TestRelax_AppliedByRunningInstanceWithinPoll: `borda limits relax` writes
// the key; a started Limiter on real Redis applies it within relax_poll.
func TestRelax_AppliedByRunningInstanceWithinPoll(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	store := NewRedisStore(testRedis(t, prefix))
	ks := keyspace.MustNew(prefix)
	cfg := rulesConfig(burstRule(10, 5*time.Second))
	cfg.RelaxPoll = 100 * time.Millisecond
	l, reg := newTestLimiter(t, cfg, ks, store)
	l.Start(context.Background())
	defer l.Stop(context.Background())
	if err := Relax(context.Background(), store, ks, "burst", 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for l.Decide(context.Background(), Subject{Route: "portal", IP: "192.0.2.9"}).Decisions[0].Limit != 30 {
		if time.Now().After(deadline) {
			t.Fatal("relax not applied within 2s with relax_poll 100ms")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if counterValue(t, reg, "borda_redis_commands_total", map[string]string{"purpose": "relax"}) < 1 {
		t.Fatal("relax polls not counted")
	}
}

// A factor in the store outside [1, MaxRelaxFactor] (written by hand,
// another tool or an older binary) is ignored by every reader: --factor
// 1e20 once overflowed floor(limit × factor) into a negative limit that
// blocked everything, and `SET …cfg:relax:burst 1e9` switched the rule
// off where the CLI refuses it (fresh attack pass A80). The rule keeps
// its own limit; the bound itself (100) still relaxes.
func TestRelax_FactorOutsideTheBoundInTheStoreIsIgnored(t *testing.T) {
	t.Parallel()
	for _, algo := range []Algorithm{FixedWindow, GCRA} {
		for _, f := range []float64{1e20, 1e9, MaxRelaxFactor + 1, math.Inf(1), math.NaN(), 0.5} {
			store := NewMemoryStore(0)
			r := burstRule(2, 5*time.Second)
			r.Algorithm = algo
			l, _ := newTestLimiter(t, rulesConfig(r), testKS, store)
			ctx := context.Background()
			if err := store.WriteRelax(ctx, testKS.Relax("burst"), f, time.Minute); err != nil {
				t.Fatal(err)
			}
			l.pollRelax(ctx)
			s := Subject{Route: "portal", IP: "203.0.113.77"}
			for i := 1; i <= 3; i++ {
				v := l.Decide(ctx, s)
				if v.Decisions[0].Limit != 2 || v.Blocked() != (i == 3) {
					t.Fatalf("%s: factor %g in the store, request %d: %s limit %d; want the rule's own limit 2", algo, f, i, outcomes(v), v.Decisions[0].Limit)
				}
			}
		}
		store := NewMemoryStore(0)
		r := burstRule(2, 5*time.Second)
		r.Algorithm = algo
		l, _ := newTestLimiter(t, rulesConfig(r), testKS, store)
		_ = store.WriteRelax(context.Background(), testKS.Relax("burst"), MaxRelaxFactor, time.Minute)
		l.pollRelax(context.Background())
		if v := l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.78"}); v.Decisions[0].Limit != 2*MaxRelaxFactor {
			t.Errorf("%s: factor %d: limit %d, want %d", algo, MaxRelaxFactor, v.Decisions[0].Limit, 2*MaxRelaxFactor)
		}
	}
}

// A relax key whose TTL is past MaxRelax (a stale or hand-made key: SET
// … PX <10 years>) is ignored by every reader, as an out-of-range factor
// is: it relaxed the rule ×100 for ten years (fresh attack pass A026).
// The longest relax the CLI writes (24 h) still applies.
func TestRelax_DurationOutsideTheBoundInTheStoreIsIgnored(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{MaxRelax + 2*time.Minute, 48 * time.Hour, 10 * 365 * 24 * time.Hour, MaxRelax, time.Minute} {
		store := NewMemoryStore(0)
		l, _ := newTestLimiter(t, rulesConfig(burstRule(2, 5*time.Second)), testKS, store)
		ctx := context.Background()
		if err := store.WriteRelax(ctx, testKS.Relax("burst"), MaxRelaxFactor, d); err != nil {
			t.Fatal(err)
		}
		l.pollRelax(ctx)
		want := int64(2)
		if d <= MaxRelax {
			want = 2 * MaxRelaxFactor
		}
		if v := l.Decide(ctx, Subject{Route: "portal", IP: "203.0.113.79"}); v.Decisions[0].Limit != want {
			t.Errorf("relax of %v in the store: limit %d, want %d", d, v.Decisions[0].Limit, want)
		}
	}
}

// `borda limits relax --factor 1e308` was accepted: a relax may raise a
// limit, never turn a rule off.
func TestRelax_FactorAboveTheCapIsRefused(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:relaxcap:")
	for _, f := range []float64{MaxRelaxFactor + 1, 1e308, math.Inf(1)} {
		if err := Relax(context.Background(), NewMemoryStore(0), ks, "burst", f, time.Minute); !errors.Is(err, ErrBadRelax) {
			t.Errorf("Relax factor %g: err = %v, want ErrBadRelax", f, err)
		}
	}
}

// Relax's bounds are inclusive: a factor of exactly 1 or MaxRelaxFactor
// and a duration of exactly MaxRelax are written; just outside each, and
// a duration of 0, are refused with ErrBadRelax.
func TestRelax_BoundsAreInclusive(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:relaxbounds:")
	for _, tc := range []struct {
		factor float64
		d      time.Duration
		ok     bool
	}{
		{1, time.Minute, true},
		{MaxRelaxFactor, time.Minute, true},
		{2, MaxRelax, true},
		{2, time.Millisecond, true},
		{math.Nextafter(1, 0), time.Minute, false},
		{math.Nextafter(MaxRelaxFactor, 1000), time.Minute, false},
		{2, MaxRelax + time.Millisecond, false},
		{2, 0, false},
		{2, -time.Second, false},
	} {
		err := Relax(context.Background(), NewMemoryStore(0), ks, "burst", tc.factor, tc.d)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadRelax)) {
			t.Errorf("Relax factor %v for %v: err = %v, want accepted %v", tc.factor, tc.d, err, tc.ok)
		}
	}
}

// A relax key removed before its TTL (an operator ending an incident's
// relax early) ends the relax at the next poll: the rule's own limit is
// back, not the last factor read.
func TestRelax_RemovedKeyEndsTheRelaxAtTheNextPoll(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	store := NewRedisStore(rdb)
	ks := keyspace.MustNew(prefix)
	cfg := rulesConfig(burstRule(2, 5*time.Second))
	cfg.Timeout = 2 * time.Second // a loaded machine must not fail open
	l, _ := newTestLimiter(t, cfg, ks, store)
	ctx := context.Background()
	if err := Relax(ctx, store, ks, "burst", 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	l.pollRelax(ctx)
	limit := func() int64 { return l.Decide(ctx, Subject{Route: "portal", IP: "203.0.113.80"}).Decisions[0].Limit }
	if got := limit(); got != 6 {
		t.Fatalf("relaxed ×3: limit %d, want 6", got)
	}
	if err := rdb.Del(ctx, ks.Relax("burst")).Err(); err != nil {
		t.Fatal(err)
	}
	l.pollRelax(ctx)
	if got := limit(); got != 2 {
		t.Errorf("after the relax key was removed: limit %d, want the rule's own 2", got)
	}
}

// A changed relax factor clears the deny cache, so a client refused under
// the old limit passes at once under the raised one, and is announced
// ("relax active") once per change, not at every poll.
func TestRelax_ChangedFactorClearsTheDenyCacheAndIsLoggedOnce(t *testing.T) {
	t.Parallel()
	var logs servicetest.LogBuffer
	store := NewMemoryStore(0)
	l, err := New(rulesConfig(burstRule(2, time.Minute)), testKS, store, prometheus.NewRegistry(),
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	relax := func(f float64) {
		t.Helper()
		if err := Relax(ctx, store, testKS, "burst", f, time.Minute); err != nil {
			t.Fatal(err)
		}
		l.pollRelax(ctx)
	}
	s := Subject{Route: "portal", IP: "203.0.113.81"}
	relax(2) // limit 4
	for i := 1; i <= 5; i++ {
		if v := l.Decide(ctx, s); v.Blocked() != (i == 5) {
			t.Fatalf("relaxed ×2, request %d: %s", i, outcomes(v))
		}
	}
	relax(5) // limit 10: the refusal cached under 4 must not stand
	if v := l.Decide(ctx, s); v.Blocked() {
		t.Fatalf("after the relax rose to ×5 the client is still refused: %s", outcomes(v))
	}
	l.pollRelax(ctx) // unchanged
	if n := strings.Count(logs.String(), `msg="relax active"`); n != 2 {
		t.Errorf(`"relax active" logged %d times for two changes and an unchanged poll, want 2:\n%s`, n, logs.String())
	}
}

// The relax key holds the factor as its shortest decimal ("1.25", "3"),
// which every reader parses back exactly: a fractional factor is not
// rounded to one digit on its way through the store.
func TestRelax_FactorIsStoredAsItsShortestDecimal(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	store := NewRedisStore(rdb)
	ks := keyspace.MustNew(prefix)
	ctx := context.Background()
	for f, want := range map[float64]string{1.25: "1.25", 3: "3", 2.125: "2.125"} {
		if err := Relax(ctx, store, ks, "burst", f, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := rdb.Get(ctx, ks.Relax("burst")).Val(); got != want {
			t.Errorf("factor %v stored as %q, want %q", f, got, want)
		}
		vals, err := store.ReadRelax(ctx, []string{ks.Relax("burst")})
		if err != nil || vals[0].Factor != f {
			t.Errorf("factor %v read back as %+v (%v)", f, vals, err)
		}
	}
}

// decodeRelax keeps only a live relax: a factor with a positive PTTL; a
// key about to expire (PTTL 0), without a TTL (-1), missing (-2) or not a
// finite number reads as no relax.
func TestDecodeRelaxKeepsOnlyALiveFactor(t *testing.T) {
	t.Parallel()
	got, err := decodeRelax(6, []any{"2", int64(60000), "2", int64(0), "2", int64(-1), nil, int64(-2), "NaN", int64(1000), "x", int64(1000)})
	if err != nil {
		t.Fatal(err)
	}
	want := []RelaxValue{{Factor: 2, TTL: time.Minute}, {}, {}, {}, {}, {}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
