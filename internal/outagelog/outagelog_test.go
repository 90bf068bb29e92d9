package outagelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

func lines(b *bytes.Buffer, level string) int { return strings.Count(b.String(), "level="+level) }

// TestAnOutageIsLoggedOnceThenSummarized: ten minutes of a probe every 2 s
// write one warn line to begin, one summary a minute, and one to end, with
// how long and how many; the 300 probes go to debug.
func TestAnOutageIsLoggedOnceThenSummarized(t *testing.T) {
	var b bytes.Buffer
	c := clock.NewManual(time.Date(2026, 3, 9, 14, 0, 0, 0, time.UTC))
	o := New(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})), Options{Every: time.Minute, Clock: c})
	if _, _, ok := o.State(); ok {
		t.Fatal("an outage before Begin")
	}
	if !o.Begin("store down", "err", "refused") || o.Begin("store down") {
		t.Fatal("Begin: want true once, then false")
	}
	for range 300 {
		c.Advance(2 * time.Second)
		o.Repeat("store still down")
	}
	since, n, ok := o.State()
	if !ok || n != 300 || c.Now().Sub(since) != 10*time.Minute {
		t.Errorf("State = %v, %d, %v; want 10m ago, 300, true", since, n, ok)
	}
	o.End("store back")
	if _, _, ok := o.State(); ok {
		t.Error("an outage after End")
	}
	out := b.String()
	if w := lines(&b, "WARN"); w != 1+10+1 {
		t.Errorf("%d warn lines, want 12 (begin, 10 summaries, end):\n%s", w, out)
	}
	for _, want := range []string{`level=WARN msg="store down" err=refused`, `level=WARN msg="store still down" for=1m0s count=30`,
		`level=WARN msg="store still down" for=10m0s count=300`, `level=WARN msg="store back" for=10m0s count=300`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s", want)
		}
	}
	b.Reset()
	o.End("store back")
	o.Repeat("batch dropped") // begins a new outage, counted
	o.Repeat("batch dropped")
	if _, n, ok := o.State(); !ok || n != 2 {
		t.Errorf("State after two Repeats = %d, %v; want 2, true", n, ok)
	}
	if lines(&b, "WARN") != 1 || !strings.Contains(b.String(), `level=WARN msg="batch dropped"`) {
		t.Errorf("after the end: %s", b.String())
	}
}

// TestWithoutSummariesOnlyTheEdgesAreWarned: every 0 leaves the summary to
// the caller (the forwarder's periodic line).
func TestWithoutSummariesOnlyTheEdgesAreWarned(t *testing.T) {
	var b bytes.Buffer
	c := clock.NewManual(time.Unix(0, 0))
	o := New(slog.New(slog.NewTextHandler(&b, nil)), Options{ForKey: "open_for", CountKey: "probes", Clock: c})
	o.Begin("open")
	for range 100 {
		c.Advance(time.Hour)
		o.Repeat("probe failed")
	}
	o.End("closed")
	if w := lines(&b, "WARN"); w != 2 || !strings.Contains(b.String(), "open_for=100h0m0s probes=100") {
		t.Errorf("%d warn lines, want 2, the end with open_for=100h0m0s probes=100:\n%s", w, b.String())
	}
}
