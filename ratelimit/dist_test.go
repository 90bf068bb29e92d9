package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// The thresholds ascend from 0, hold every integer to 10, and two
// consecutive ones differ by at most 25 % from 10 on: the bound that puts
// a suggestion within 25 % of the exact limit.
func TestDistributionThresholdsAreFineEnough(t *testing.T) {
	t.Parallel()
	th := DistributionThresholds
	if th[0] != 0 {
		t.Fatalf("first threshold %d, want 0 (every subject-window)", th[0])
	}
	for i := 1; i < len(th); i++ {
		if th[i] <= th[i-1] {
			t.Fatalf("thresholds not ascending at %d: %d after %d", i, th[i], th[i-1])
		}
		if th[i-1] < 10 && th[i] != th[i-1]+1 {
			t.Errorf("threshold %d follows %d: every integer below 10 must be a threshold", th[i], th[i-1])
		}
		if th[i-1] >= 10 && float64(th[i]) > 1.25*float64(th[i-1]) {
			t.Errorf("threshold %d follows %d: more than 25 %% apart", th[i], th[i-1])
		}
	}
	if last := th[len(th)-1]; last < 1000000 {
		t.Errorf("last threshold %d, want at least 1 000 000", last)
	}
}

// thresholdIndex agrees with a linear search, on the table and past it.
func TestThresholdIndexAgreesWithTheList(t *testing.T) {
	t.Parallel()
	want := map[int64]int{}
	for i, v := range DistributionThresholds {
		want[v] = i
	}
	check := func(n int64) {
		w, ok := want[n]
		if !ok {
			w = -1
		}
		if got := thresholdIndex(n); got != w {
			t.Fatalf("thresholdIndex(%d) = %d, want %d", n, got, w)
		}
	}
	for n := int64(-3); n <= 3000; n++ {
		check(n)
	}
	for _, v := range DistributionThresholds {
		check(v - 1)
		check(v)
		check(v + 1)
	}
}

// countPast counts exactly the thresholds in [before, after), whatever
// the step: one hit, or a sync round's many.
func TestCountPastCountsTheThresholdsCrossed(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 9))
	for range 2000 {
		before := rng.Int64N(3000) - 5
		after := before + 1
		if rng.IntN(2) == 0 {
			after = before + rng.Int64N(500)
		}
		var d distribution
		d.countPast(before, after)
		for i, v := range DistributionThresholds {
			want := int64(0)
			if v >= before && v < after {
				want = 1
			}
			if got := d.past[i].Load(); got != want {
				t.Fatalf("countPast(%d, %d): threshold %d counted %d, want %d", before, after, v, got, want)
			}
		}
	}
}

// countPast's edges: a step that starts on a threshold counts it, and one
// that ends past the last threshold counts up to it and no further.
func TestCountPastEdges(t *testing.T) {
	t.Parallel()
	th := DistributionThresholds
	last := th[len(th)-1]
	for _, tc := range []struct {
		before, after int64
		want          []int64 // the thresholds counted
	}{
		{th[20], th[20] + 3, []int64{th[20]}},
		{th[20], th[21] + 1, []int64{th[20], th[21]}},
		{last - 1, 2 * last, []int64{last}},
		{last, last + 5, []int64{last}},
		{last + 1, 3 * last, nil},
		{-7, 2, []int64{0, 1}},
	} {
		var d distribution
		d.countPast(tc.before, tc.after)
		var got []int64
		for i, v := range th {
			if n := d.past[i].Load(); n > 0 {
				got = append(got, v)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("countPast(%d, %d) counted %v, want %v", tc.before, tc.after, got, tc.want)
		}
	}
}

// observeSync counts, for a fixed-window key merged by a sync exchange,
// the thresholds between what the store held before this replica's part
// and what it holds after: the part is what the replica counted since its
// read (Local − Base, never negative) plus the lease the store granted it.
func TestObserveSyncCountsWhatTheMergeAdded(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	for _, tc := range []struct {
		name string
		op   SyncOp
		got  KeyState
		want []int64
	}{
		{"counted since the read", SyncOp{Base: KeyState{N: 2, TTL: ttl}, Local: KeyState{N: 5}}, KeyState{N: 10, TTL: ttl}, []int64{7, 8, 9}},
		{"no read yet", SyncOp{Local: KeyState{N: 5}}, KeyState{N: 10, TTL: ttl}, []int64{5, 6, 7, 8, 9}},
		{"a lease granted", SyncOp{Base: KeyState{N: 2, TTL: ttl}, Local: KeyState{N: 2}}, KeyState{N: 10, TTL: ttl, Leased: 4}, []int64{6, 7, 8, 9}},
		{"a lease and counts", SyncOp{Base: KeyState{N: 2, TTL: ttl}, Local: KeyState{N: 3}}, KeyState{N: 10, TTL: ttl, Leased: 2}, []int64{7, 8, 9}},
		{"the view behind its read", SyncOp{Base: KeyState{N: 3, TTL: ttl}, Local: KeyState{N: 1}}, KeyState{N: 10, TTL: ttl}, nil},
		{"the key gone", SyncOp{Local: KeyState{N: 5}}, KeyState{}, nil},
		{"a GCRA key", SyncOp{Hit: Hit{Algorithm: GCRA}, Local: KeyState{N: 5}}, KeyState{N: 10, TTL: ttl}, nil},
	} {
		d := &distribution{}
		op := tc.op
		op.Hit.dist = d
		if op.Hit.Algorithm == 0 {
			op.Hit.Algorithm = FixedWindow
		}
		observeSync([]SyncOp{op}, []KeyState{tc.got})
		var got []int64
		for i, v := range DistributionThresholds {
			if n := d.past[i].Load(); n > 0 {
				got = append(got, v)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: counted %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TakeDistribution returns only the thresholds counted since the last
// take (none with a zero count), and nothing when nothing was counted.
func TestTakeDistributionReturnsOnlyWhatWasCounted(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(t, rulesConfig(burstRule(100, time.Hour)), keyspace.MustNew("olp-dev:ttakedist:"), NewMemoryStore(1000))
	if got := l.TakeDistribution(); len(got) != 0 {
		t.Fatalf("before any request: %v, want nothing", got)
	}
	for range 3 {
		l.Decide(context.Background(), Subject{Route: "portal", IP: "203.0.113.9"})
	}
	got := l.TakeDistribution()
	if len(got) != 3 {
		t.Fatalf("one subject-window of 3 requests: %v, want thresholds 0, 1 and 2 once each", got)
	}
	for _, c := range got {
		if c.Rule != "burst" || c.At > 2 || c.Past != 1 {
			t.Errorf("count %+v, want rule burst, threshold 0 to 2, past 1", c)
		}
	}
	if again := l.TakeDistribution(); len(again) != 0 {
		t.Errorf("a second take returned %v, want nothing", again)
	}
}

// distOf sums TakeDistribution by rule and threshold.
func distOf(ls ...*Limiter) map[string]map[int64]int64 {
	out := map[string]map[int64]int64{}
	for _, l := range ls {
		for _, c := range l.TakeDistribution() {
			if out[c.Rule] == nil {
				out[c.Rule] = map[int64]int64{}
			}
			out[c.Rule][c.At] += c.Past
		}
	}
	return out
}

// expectedDist is the distribution of subject-windows with the given
// counts: for each threshold, how many counts exceed it.
func expectedDist(counts []int64) map[int64]int64 {
	out := map[int64]int64{}
	for _, n := range counts {
		for _, at := range DistributionThresholds {
			if n > at {
				out[at]++
			}
		}
	}
	return out
}

func checkDist(t *testing.T, what string, got, want map[int64]int64) {
	t.Helper()
	for _, at := range DistributionThresholds {
		if got[at] != want[at] {
			t.Errorf("%s: past %d = %d, want %d", what, at, got[at], want[at])
		}
	}
}

// The counters count, per rule, the subject-windows past each threshold,
// from the counts the store returns (real Redis, one round trip per
// request and no other command), for an observe rule and an enforce rule
// whose subjects stay under the limit; GCRA and sliding rules have none.
// Taking them zeroes them.
func TestDistribution_CountsSubjectWindowsPastEachThreshold(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	ks := keyspace.MustNew(prefix)
	cc := &commandCounter{}
	rdb.AddHook(cc)
	opts := rulesConfig(
		Rule{Name: "obs", Scope: ScopeUser, Mode: Observe, Limit: 5, Window: time.Minute, Routes: []string{AllRoutes}},
		Rule{Name: "ip", Scope: ScopeIP, Limit: 1000, Window: time.Minute, Routes: []string{AllRoutes}},
		Rule{Name: "g", Scope: ScopeEscola, Algorithm: GCRA, Limit: 100000, Window: time.Minute, Routes: []string{AllRoutes}},
	)
	opts.Timeout = 2 * time.Second // a loaded machine must not fail open
	l, _ := newTestLimiterWith(t, opts, ks, NewRedisStore(rdb))
	rng := rand.New(rand.NewPCG(5, 5))
	users := make([]int64, 40)
	for i := range users {
		users[i] = 1 + rng.Int64N(60)
	}
	ctx := context.Background()
	var requests int64
	perIP := map[string]int64{}
	for i, n := range users {
		for range n {
			ip := fmt.Sprintf("192.0.2.%d", i%7)
			perIP[ip]++
			l.Decide(ctx, Subject{Route: "portal", IP: ip, User: fmt.Sprintf("u%d", i), Escola: "e1"})
			requests++
		}
	}
	// An aligned window may turn over during the loop; a test minute that
	// does is retried rather than asserted on.
	got := distOf(l)
	if len(got["g"]) != 0 {
		t.Errorf("the GCRA rule has distribution counts %v, want none", got["g"])
	}
	ipCounts := make([]int64, 0, len(perIP))
	for _, n := range perIP {
		ipCounts = append(ipCounts, n)
	}
	checkDist(t, "ip rule", got["ip"], expectedDist(ipCounts))
	if got["obs"][0] == int64(len(users)) { // no minute turned over
		checkDist(t, "observe rule", got["obs"], expectedDist(users))
	} else {
		t.Logf("the aligned minute turned over during the test (%d subject-windows for %d users): observe rule not compared", got["obs"][0], len(users))
	}
	// One script call per request, plus the script's load and the
	// connection's setup (a round trip per crossing would be hundreds).
	if n := cc.n.Load(); n > requests+3 {
		t.Errorf("%d Redis commands for %d requests: the counters must cost none", n, requests)
	}
	if again := distOf(l); len(again) != 0 {
		t.Errorf("a second take returned %v, want nothing", again)
	}
}

// In sync mode the counters are counted in the sync round from the
// store's merged count, so two replicas sharing subjects count each
// subject-window once, exactly as one replica would (real Redis).
func TestDistribution_SyncReplicasCountEachSubjectWindowOnce(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	rdb := testRedis(t, prefix)
	ks := keyspace.MustNew(prefix)
	opts := rulesConfig(Rule{Name: "burst", Scope: ScopeIP, Mode: Observe, Limit: 5, Window: time.Hour, Routes: []string{AllRoutes}})
	opts.Sync = 50 * time.Millisecond
	opts.Timeout = time.Second
	a, _ := newTestLimiterWith(t, opts, ks, NewRedisStore(rdb))
	b, _ := newTestLimiterWith(t, opts, ks, NewRedisStore(rdb))
	rng := rand.New(rand.NewPCG(8, 1))
	counts := make([]int64, 30)
	ctx := context.Background()
	for i := range counts {
		counts[i] = 1 + rng.Int64N(300)
	}
	// Interleave: each replica takes random runs of each subject's
	// requests, with rounds in between.
	left := append([]int64(nil), counts...)
	for {
		done := true
		for i := range left {
			if left[i] == 0 {
				continue
			}
			done = false
			l := a
			if rng.IntN(2) == 0 {
				l = b
			}
			run := min(left[i], 1+rng.Int64N(40))
			for range run {
				l.Decide(ctx, Subject{Route: "portal", IP: fmt.Sprintf("198.51.100.%d", i)})
			}
			left[i] -= run
		}
		for _, l := range []*Limiter{a, b} {
			if _, _, err := l.sync.round(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if done {
			break
		}
	}
	checkDist(t, "two replicas", distOf(a, b)["burst"], expectedDist(counts))
}

// A reload keeps the counts not yet taken, and a rule that stays keeps
// counting into the same counters.
func TestDistribution_ReloadKeepsTheCounts(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:dist-reload:")
	rules := []Rule{{Name: "burst", Scope: ScopeIP, Mode: Observe, Limit: 5, Window: time.Hour, Routes: []string{AllRoutes}}}
	l, _ := newTestLimiterWith(t, rulesConfig(rules...), ks, NewMemoryStore(0))
	ctx := context.Background()
	for range 3 {
		l.Decide(ctx, Subject{Route: "portal", IP: "192.0.2.1"})
	}
	rules[0].Limit = 50
	if err := l.Reload(rules); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		l.Decide(ctx, Subject{Route: "portal", IP: "192.0.2.1"})
	}
	checkDist(t, "across a reload", distOf(l)["burst"], expectedDist([]int64{5}))
}
