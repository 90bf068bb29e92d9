package main

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/adminui/promwindow"
	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/schema"
)

// The page's Rollout section reads the last day of gateway_metrics: each
// rule's distribution with the suggestion (the generated month's laws
// give 180 and 1500 on any day), the day's would-blocks only, and says
// why there is nothing without a database.
func TestOpsRolloutReadsTheLastDayOfGatewayMetrics(t *testing.T) {
	ctx := t.Context()
	pool, dbURL := servicetest.IsolatedDatabase(t)
	if err := schema.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	// A fixed weekday: the generated month has school-day and weekend
	// traffic, so the last day's suggestion on a Sunday differs (this test
	// failed on 2026-12-06, a Sunday, with time.Now).
	now := time.Date(2026, 11, 18, 15, 0, 0, 0, time.UTC)
	if err := writeGeneratedMonth(ctx, pool, "staging", now, 3); err != nil {
		t.Fatal(err)
	}
	var wantWB int64
	if err := pool.QueryRow(ctx, `SELECT sum(count) FROM gateway_metrics WHERE kind = 'would_block' AND minute >= $1`, now.Add(-rolloutSpan)).Scan(&wantWB); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Parse([]byte(fmt.Sprintf(exampleConfig, dbURL)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var p atomic.Pointer[configs.Config]
	p.Store(&cfg)
	win := promwindow.New(prometheus.NewRegistry(), opsWindowFamilies, 10*time.Second, opsSpan+time.Minute)
	st := (&opsRollout{cfg: &p, db: pool, window: win, now: func() time.Time { return now }}).Rollout(ctx)
	if st.Note != "" || st.Span != rolloutSpan {
		t.Fatalf("note %q, span %v", st.Note, st.Span)
	}
	if st.WouldBlocks != wantWB || wantWB == 0 {
		t.Errorf("would-blocks %d, want the last day's %d", st.WouldBlocks, wantWB)
	}
	want := map[string]int64{"api": 180, "escola": 1500}
	if len(st.Rules) != 2 {
		t.Fatalf("rules %+v", st.Rules)
	}
	for _, r := range st.Rules {
		if r.Suggested != want[r.Rule] || len(r.Points) == 0 || r.SubjectWindows == 0 || r.Note != "" {
			t.Errorf("rule %s: suggested %d (want %d), %d points, %d subject-windows, note %q", r.Rule, r.Suggested, want[r.Rule], len(r.Points), r.SubjectWindows, r.Note)
		}
	}
	none := (&opsRollout{cfg: &p, window: win}).Rollout(ctx)
	if none.Note == "" || len(none.Rules) != 0 {
		t.Errorf("without a database: note %q, %d rules", none.Note, len(none.Rules))
	}
}
