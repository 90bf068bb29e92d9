package forward

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
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
	b := newBreaker(1, time.Millisecond, prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}), log)
	waitHalfOpen := func() {
		deadline := time.Now().Add(5 * time.Second)
		for b.State() != gobreaker.StateHalfOpen {
			if time.Now().After(deadline) {
				t.Fatal("the breaker did not go half-open")
			}
			time.Sleep(time.Millisecond)
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
	if _, n, ok := b.flapping(time.Now()); !ok || n != probes {
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
	if _, _, ok := b.flapping(time.Now()); ok {
		t.Error("still flapping after the close")
	}
}
