package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/schema"
	"github.com/olp-edu/borda/telemetry"
)

// The law of the observation traffic: a Pareto with scale xm and shape
// alpha, one count per subject-window, P(count > t) = (xm/t)^alpha for
// t ≥ xm. The counts are its quantiles at (i + ½)/n (stratified: the
// sample's shares are the law's within 1/n).
const (
	lawXM    = 5.0
	lawAlpha = 1.5
)

func lawSurvival(t float64) float64 {
	if t < lawXM {
		return 1
	}
	return math.Pow(lawXM/t, lawAlpha)
}

// lawCounts returns n counts: ceil of the law's quantile at (i + ½)/n.
func lawCounts(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		u := (float64(i) + 0.5) / float64(n) // survival probability
		out[i] = int64(math.Ceil(lawXM / math.Pow(u, 1/lawAlpha)))
	}
	return out
}

// lawSuggestion is the threshold the law predicts: the smallest one whose
// survival is at most share.
func lawSuggestion(share float64) int64 {
	for _, at := range ratelimit.DistributionThresholds[1:] {
		if lawSurvival(float64(at)) <= share {
			return at
		}
	}
	return -1
}

// Done-when of issue 26: observation traffic with a known distribution
// (200 users, counts drawn from a Pareto law, four windows each) goes
// through the real limiter on real Redis, with and without
// rate_limits.sync; the telemetry recorder writes the distribution
// counters (every key with a TTL of at most 2 h), `borda aggregate` folds
// them into PostgreSQL, and `borda limits suggest` finds the threshold
// the law predicts, within 25 % of the sample's exact limit.
func TestLimitsSuggestFindsTheThresholdTheLawPredicts(t *testing.T) {
	for _, sync := range []time.Duration{0, 50 * time.Millisecond} {
		t.Run(fmt.Sprintf("sync=%s", sync), func(t *testing.T) { suggestFromObservedTraffic(t, sync) })
	}
}

func suggestFromObservedTraffic(t *testing.T, sync time.Duration) {
	const (
		users   = 200
		windows = 4
		window  = 2 * time.Second
		share   = 0.034 // between the survivals at 45 (0.037) and 50 (0.032)
	)
	want := lawSuggestion(share)
	// The test can fail: the law's share at the threshold below the
	// predicted one is more than the sample's resolution above share, and
	// at the predicted one more than it below.
	res := 1.0 / float64(users*windows)
	prev := ratelimit.DistributionThresholds[indexOf(want)-1]
	if lawSurvival(float64(prev))-share < 1.5*res || share-lawSurvival(float64(want)) < 1.5*res {
		t.Fatalf("law too close to the share at %d/%d for %d subject-windows", prev, want, users*windows)
	}

	redisURL := servicetest.RedisURL(t)
	db, dbURL := servicetest.IsolatedDatabase(t)
	if err := schema.Up(t.Context(), dbURL); err != nil {
		t.Fatal(err)
	}
	prefix := servicetest.KeyPrefix(t)
	path := writeConfig(t, fmt.Sprintf(`environment: development
redis: {url: %q, key_prefix: %q}
database: {url: %q}
rate_limits:
  sync: %s
  timeout: 2s
  rules:
    - {name: api, scope: user, mode: observe, limit: 100, window: %s, routes: ["*"]}
routes:
  - {name: portal, upstream: "http://127.0.0.1:3000"}
`, redisURL, prefix, dbURL, sync, window))
	cfg, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rdb := servicetest.RedisClient(t, redisURL, false)
	ks := keyspace.MustNew(prefix)
	t.Cleanup(func() {
		ctx := context.Background()
		for _, k := range scanAll(t, rdb, prefix+"*") {
			rdb.Del(ctx, k)
		}
	})
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	store := ratelimit.NewRedisStore(rdb)
	lim, err := ratelimit.New(limiterOptions(cfg), ks, store, reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := telemetry.NewRecorder(recorderOptions(cfg.Telemetry), ks, telemetry.NewRedisSink(rdb), reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	rec.SetDistribution(limiterDistribution{lim})
	ctx := t.Context()
	if err := lim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.Start(ctx); err != nil {
		t.Fatal(err)
	}

	counts := lawCounts(users * windows)
	for w := range windows {
		for u := range users {
			s := ratelimit.Subject{Route: "portal", IP: "192.0.2.9", User: fmt.Sprintf("u%d", u)}
			for range counts[w*users+u] {
				if v := lim.Decide(ctx, s); len(v.Decisions) != 1 || v.Decisions[0].Outcome == ratelimit.OutcomeError {
					t.Fatalf("decision %+v: the store failed", v.Decisions)
				}
			}
		}
		// The next window starts when this one's keys have expired in
		// the store (and, with sync, in the replica's view, sent first).
		if sync > 0 {
			waitFor(t, 5*time.Second, "the sync round", func() bool { return countKeys(t, rdb, prefix+"rl:api:*") >= users })
		}
		waitFor(t, 3*window+5*time.Second, "the window's keys to expire", func() bool {
			return countKeys(t, rdb, prefix+"rl:api:*") == 0
		})
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lim.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if err := rec.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	for _, k := range scanAll(t, rdb, prefix+"*") {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl < 0 || ttl > telemetry.TTL {
			t.Errorf("key %s has TTL %v, want one of at most %v", k, ttl, telemetry.TTL)
		}
	}

	var out, errb bytes.Buffer
	if code := runAggregate(ctx, []string{"--config", path}, &out, &errb); code != 0 {
		t.Fatalf("aggregate: exit %d, %s %s", code, out.String(), errb.String())
	}
	var rows int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM gateway_metrics WHERE kind = 'distribution'").Scan(&rows); err != nil || rows == 0 {
		t.Fatalf("gateway_metrics distribution rows: %d (%v)", rows, err)
	}

	out.Reset()
	errb.Reset()
	args := []string{"suggest", "--config", path, "--format", "json", "--max-blocked-share", fmt.Sprint(share)}
	if code := runLimits(ctx, args, &out, &errb); code != 0 {
		t.Fatalf("limits suggest: exit %d, stderr %s", code, errb.String())
	}
	var got []struct {
		Rule           string `json:"rule"`
		Scope          string `json:"scope"`
		Limit          int64  `json:"limit"`
		Window         string `json:"window"`
		SubjectWindows int64  `json:"subject_windows"`
		Thresholds     []struct {
			At           int64   `json:"at"`
			BlockedShare float64 `json:"blocked_share"`
		} `json:"thresholds"`
		SuggestedLimit *int64   `json:"suggested_limit"`
		Notes          []string `json:"notes"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 1 {
		t.Fatalf("json %q: %v", out.String(), err)
	}
	g := got[0]
	t.Logf("sync %s: %d subject-windows, suggested %d (law: %d), notes %q", sync, g.SubjectWindows, deref(g.SuggestedLimit), want, g.Notes)
	if g.Rule != "api" || g.Scope != "user" || g.Limit != 100 || g.Window != window.String() {
		t.Errorf("rule fields %+v", g)
	}
	if g.SubjectWindows != users*windows {
		t.Errorf("subject_windows = %d, want %d", g.SubjectWindows, users*windows)
	}
	if g.SuggestedLimit == nil || *g.SuggestedLimit != want {
		t.Fatalf("suggested_limit = %v, want %d (the law's threshold for share %v)", g.SuggestedLimit, want, share)
	}
	// Within 25 % of the sample's exact limit: the smallest count that
	// blocks at most share.
	exact := exactLimit(counts, share)
	if d := math.Abs(float64(*g.SuggestedLimit-exact)) / float64(exact); d > 0.25 {
		t.Errorf("suggested %d is %.0f%% from the exact limit %d", *g.SuggestedLimit, 100*d, exact)
	}
	for _, th := range g.Thresholds {
		var past int64
		for _, c := range counts {
			if c > th.At {
				past++
			}
		}
		if w := float64(past) / float64(len(counts)); math.Abs(th.BlockedShare-w) > 1e-9 {
			t.Errorf("blocked_share at %d = %v, want %v", th.At, th.BlockedShare, w)
		}
	}
	if len(g.Notes) == 0 || !strings.Contains(strings.Join(g.Notes, " "), "four weeks") {
		t.Errorf("notes %q: want the under-four-weeks warning", g.Notes)
	}

	// The table says the same, with the YAML change.
	out.Reset()
	if code := runLimits(ctx, []string{"suggest", "--config", path, "--max-blocked-share", fmt.Sprint(share)}, &out, &errb); code != 0 {
		t.Fatalf("limits suggest (table): exit %d", code)
	}
	for _, s := range []string{fmt.Sprintf("limit: %d  # was 100", want), "warning: api: only", "YAML change"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table output lacks %q:\n%s", s, out.String())
		}
	}
}

func indexOf(at int64) int {
	for i, v := range ratelimit.DistributionThresholds {
		if v == at {
			return i
		}
	}
	return -1
}

// exactLimit is the smallest count L at which at most share of counts
// exceed L.
func exactLimit(counts []int64, share float64) int64 {
	for l := int64(1); ; l++ {
		var past int64
		for _, c := range counts {
			if c > l {
				past++
			}
		}
		if float64(past) <= share*float64(len(counts)) {
			return l
		}
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func scanAll(t *testing.T, rdb redis.UniversalClient, match string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scanning %s: %v", match, err)
	}
	return keys
}

func countKeys(t *testing.T, rdb redis.UniversalClient, match string) int {
	return len(scanAll(t, rdb, match))
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
