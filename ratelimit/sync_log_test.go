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
