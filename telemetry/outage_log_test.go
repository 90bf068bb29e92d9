package telemetry

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/keyspace"
)

// TestDroppedBatchesAreLoggedOnceThenSummarized: with Redis down every
// flush (one a second) logged "telemetry batch dropped" at warn, about 60
// lines a minute beside the breaker's. Ten minutes of it now write the
// first drop, one summary a minute (how long, how many batches) and the
// line saying writes resumed.
func TestDroppedBatchesAreLoggedOnceThenSummarized(t *testing.T) {
	var logs bytes.Buffer
	sink := &memSink{err: errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")}
	r, err := NewRecorder(defaultOptions(), keyspace.MustNew("olp-dev:toutage:"), sink, prometheus.NewRegistry(),
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 9, 14, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	flushOne := func() {
		b := newBatch(r.maxPerRoute)
		b.add(Event{Time: now, Route: "portal", Path: "/", Status: 200}, r.now)
		r.flush(t.Context(), b)
	}
	for range 600 { // ten minutes, a flush a second
		flushOne()
		now = now.Add(time.Second)
	}
	sink.mu.Lock()
	sink.err = nil
	sink.mu.Unlock()
	flushOne()
	out := logs.String()
	// The drops run from 0 s to 599 s: a summary at each full minute in
	// that span (9), then the line saying writes resumed.
	if n := strings.Count(out, "level=WARN"); n != 1+9+1 {
		t.Errorf("%d warn lines for ten minutes of drops, want 11 (first, a summary a minute, resumed):\n%s", n, out)
	}
	for _, want := range []string{`msg="telemetry batch dropped" events=1 counters=`, "for=1m0s batches=61",
		`msg="telemetry writes resumed: batches reach Redis again" for=10m0s batches=600`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if got := dropped(t, r, "store_error"); got != 600 {
		t.Errorf("dropped{store_error} = %v, want 600 (every event still counted)", got)
	}
}
