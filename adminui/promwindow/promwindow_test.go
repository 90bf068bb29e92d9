package promwindow

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestWindow(t *testing.T) (*Window, *prometheus.CounterVec, prometheus.Histogram, *clock) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t_decisions_total", Help: "h"}, []string{"rule", "decision"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "t_seconds", Help: "h", Buckets: []float64{0.01, 0.02, 0.04}})
	reg.MustRegister(c, h)
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	w := New(reg, []string{"t_decisions_total", "t_seconds"}, time.Second, time.Hour)
	w.now = clk.now
	w.started = clk.t
	return w, c, h, clk
}

func TestDeltaCountsOnlyTheGrowthOverTheSpan(t *testing.T) {
	w, c, _, clk := newTestWindow(t)
	c.WithLabelValues("api", "allow").Add(100) // before the window's span
	clk.t = clk.t.Add(time.Minute)
	w.Sample()
	clk.t = clk.t.Add(5 * time.Minute)
	w.Sample()
	c.WithLabelValues("api", "allow").Add(7)
	c.WithLabelValues("api", "block").Add(3)
	c.WithLabelValues("burst", "allow").Add(2)
	clk.t = clk.t.Add(30 * time.Second)

	got, span := w.DeltaBy("t_decisions_total", "rule", map[string]string{"decision": "allow"}, 5*time.Minute)
	if got["api"] != 7 || got["burst"] != 2 || span != 5*time.Minute+30*time.Second {
		t.Fatalf("DeltaBy = %v over %s, want api 7, burst 2 over 5m30s", got, span)
	}
	if d, _ := w.Delta("t_decisions_total", nil, 5*time.Minute); d != 12 {
		t.Fatalf("Delta = %v, want 12", d)
	}
}

func TestDeltaOfAYoungWindowCountsFromItsStart(t *testing.T) {
	w, c, _, clk := newTestWindow(t)
	c.WithLabelValues("api", "allow").Add(4)
	clk.t = clk.t.Add(20 * time.Second)
	d, span := w.Delta("t_decisions_total", nil, 5*time.Minute)
	if d != 4 || span != 20*time.Second {
		t.Fatalf("Delta = %v over %s, want 4 over 20s", d, span)
	}
}

func TestQuantileInterpolatesWithinTheBucketsGrowth(t *testing.T) {
	w, _, h, clk := newTestWindow(t)
	for range 10 {
		h.Observe(0.5) // old, slow: outside the span
	}
	w.Sample()
	clk.t = clk.t.Add(10 * time.Minute)
	for range 10 {
		h.Observe(0.015) // all in (0.01, 0.02]
	}
	p50, n, ok := w.Quantile("t_seconds", nil, 0.5, 5*time.Minute)
	if !ok || n != 10 || math.Abs(p50-0.015) > 1e-9 {
		t.Fatalf("p50 = %v from %v (ok %v), want 0.015 from 10", p50, n, ok)
	}
	if _, _, ok := w.Quantile("t_missing", nil, 0.5, time.Minute); ok {
		t.Fatal("a quantile of a family never sampled")
	}
}

func TestSamplesOlderThanKeepAreDropped(t *testing.T) {
	w, _, _, clk := newTestWindow(t)
	for range 5 {
		w.Sample()
		clk.t = clk.t.Add(30 * time.Minute)
	}
	w.Sample()
	if n := len(w.samples); n != 3 {
		t.Fatalf("%d samples kept over 2h30m with keep 1h, want 3", n)
	}
}

func TestCurrentReadsTheGaugeNow(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "t_connected", Help: "h"})
	reg.MustRegister(g)
	w := New(reg, []string{"t_connected"}, 0, 0)
	g.Set(1)
	if v, ok := w.Current("t_connected", nil); !ok || v != 1 {
		t.Fatalf("Current = %v %v, want 1 true", v, ok)
	}
	if _, ok := w.Current("t_absent", nil); ok {
		t.Fatal("Current found an absent family")
	}
}
