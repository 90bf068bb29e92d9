package ratelimit

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestSync_FailedRoundLogsThatItDecidesLocally: a failed sync round logged
// "failing open", while the replica keeps deciding on its local counts
// (it blocks the 4th request of a limit of 3); the log says what the code
// does.
func TestSync_FailedRoundLogsThatItDecidesLocally(t *testing.T) {
	t.Parallel()
	store := &failingSyncStore{MemoryStore: NewMemoryStore(0), fail: true}
	opts := rulesConfig(burstRule(3, time.Minute))
	opts.Sync = 50 * time.Millisecond
	var buf bytes.Buffer
	l, err := New(opts, testKS, store, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Decide(ctx, Subject{Route: "portal", IP: "198.51.100.6"})
	l.syncRound(ctx)
	out := buf.String()
	if strings.Contains(out, "failing open") || !strings.Contains(out, "deciding on local counts") {
		t.Errorf("a failed sync round logged:\n%s", out)
	}
}

// TestSync_AnOutageOfRoundsIsLoggedOnceThenSummarized: with
// rate_limits.sync at 50 ms a store outage logged a failed round every
// second (~60 lines a minute). Two minutes of failed rounds now log the
// first, a summary each minute (how long, how many rounds) and, at the first
// good round, that counts are shared again.
func TestSync_AnOutageOfRoundsIsLoggedOnceThenSummarized(t *testing.T) {
	t.Parallel()
	store := &failingSyncStore{MemoryStore: NewMemoryStore(0), fail: true}
	opts := rulesConfig(burstRule(3, time.Minute))
	opts.Sync = 50 * time.Millisecond
	now := time.Date(2026, 3, 9, 14, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	l, err := New(withClock(opts, func() time.Time { return now }), testKS, store, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2400 { // two minutes of rounds every 50 ms, each with a count to send
		l.Decide(ctx, Subject{Route: "portal", IP: "198.51.100.7"})
		l.syncRound(ctx)
		now = now.Add(50 * time.Millisecond)
	}
	store.fail = false
	l.syncRound(ctx)
	out := buf.String()
	// Rounds from 0 to 119.95 s: the summary at 1 minute, then the end.
	if n := strings.Count(out, "level=WARN"); n != 1+1+1 {
		t.Errorf("%d warn lines for two minutes of failed rounds, want 3 (first, a summary, resumed):\n%s", n, out)
	}
	for _, want := range []string{"deciding on local counts", "for=1m0s rounds=1201",
		`msg="rate-limit sync rounds reach the store again; counts are shared across replicas" component=ratelimit for=2m0s rounds=2400`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
