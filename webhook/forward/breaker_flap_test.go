package forward

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/breaker"
	"github.com/olp-edu/borda/internal/clock"
)

// TestBreakerFlappingIsLoggedOnceThenSummarized: an endpoint that stays
// down makes the breaker go open → half-open → open on every probe; that
// logged a warn pair per probe (~60 lines a minute). Now the first open
// and the close are the only warn lines, the close says how long it was
// open and how many probes it took, and flapping reports the same while
// it lasts.
func TestBreakerFlappingIsLoggedOnceThenSummarized(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	b := newBreaker(1, time.Second, senderSet{}, clk, prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}), log)
	waitHalfOpen := func() {
		t.Helper()
		if s := b.State(); s != breaker.StateOpen {
			t.Fatalf("state %s before the open period ended, want open", s)
		}
		clk.Advance(time.Second + time.Nanosecond) // the open period ends
		if s := b.State(); s != breaker.StateHalfOpen {
			t.Fatalf("state %s after the open period, want half-open", s)
		}
	}
	const probes = 5
	for i := 0; i <= probes; i++ {
		if i > 0 {
			waitHalfOpen()
		}
		done, err := b.allow()
		if err != nil {
			t.Fatalf("probe %d refused: %v", i, err)
		}
		done(errors.New("503"))
	}
	if _, n, ok := b.flapping(clk.Now()); !ok || n != probes {
		t.Errorf("flapping = %d probes, %v; want %d, true", n, ok, probes)
	}
	waitHalfOpen()
	done, err := b.allow()
	if err != nil {
		t.Fatal(err)
	}
	done(nil)
	out := buf.String()
	if n := strings.Count(out, "level=WARN"); n != 2 {
		t.Errorf("%d warn lines, want 2 (opened, closed):\n%s", n, out)
	}
	if !strings.Contains(out, "forward breaker opened") || !strings.Contains(out, "forward breaker closed") || !strings.Contains(out, "probes=6") {
		t.Errorf("log lacks the open, or the close with its probes:\n%s", out)
	}
	if _, _, ok := b.flapping(clk.Now()); ok {
		t.Error("still flapping after the close")
	}
}
