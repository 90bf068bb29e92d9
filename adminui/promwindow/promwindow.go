// Package promwindow keeps the last minutes of a Prometheus registry's
// counters and histograms, so the operator page can say what happened
// "over the last 5 minutes" without a Prometheus server
// (docs/operations.md): a Window gathers the named families every Every
// and keeps Keep of samples; Delta and Quantile compare a gather made
// when they are called with the sample that far back.
package promwindow

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/olp-edu/borda/internal/startstop"
)

// Window samples a Gatherer. Build it with New; Start and Stop it
// (internal/startstop). Its methods are safe for concurrent use.
type Window struct {
	startstop.Runner
	g       prometheus.Gatherer
	names   []string
	every   time.Duration
	keep    time.Duration
	now     func() time.Time
	mu      sync.Mutex
	started time.Time
	samples []sample // oldest first
}

type sample struct {
	at   time.Time
	fams map[string][]series
}

type series struct {
	key     string // the sorted label pairs
	labels  map[string]string
	value   float64 // counter or gauge value; histogram sample count
	buckets []bucket
}

type bucket struct {
	le    float64
	count float64
}

// New returns a Window over the families named (only these are kept),
// sampled every every (0: 10s) and kept for keep (0: 6m).
func New(g prometheus.Gatherer, names []string, every, keep time.Duration) *Window {
	if every <= 0 {
		every = 10 * time.Second
	}
	if keep <= 0 {
		keep = 6 * time.Minute
	}
	return &Window{g: g, names: slices.Clone(names), every: every, keep: keep, now: time.Now}
}

// Start samples at once, then every Every, until Stop.
func (w *Window) Start(ctx context.Context) error {
	w.mu.Lock()
	if w.started.IsZero() {
		w.started = w.now()
	}
	w.mu.Unlock()
	return w.Runner.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(w.every)
		defer t.Stop()
		for {
			w.Sample()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// Sample gathers the families now, keeps the sample and drops samples
// older than Keep.
func (w *Window) Sample() {
	s := w.gather()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started.IsZero() {
		w.started = s.at
	}
	w.samples = append(w.samples, s)
	cut := 0
	for cut < len(w.samples)-1 && s.at.Sub(w.samples[cut].at) > w.keep {
		cut++
	}
	w.samples = w.samples[cut:]
}

// gather reads the named families now.
func (w *Window) gather() sample {
	mfs, _ := w.g.Gather() // a partial gather still has the good families
	s := sample{at: w.now(), fams: make(map[string][]series, len(w.names))}
	for _, mf := range mfs {
		if !slices.Contains(w.names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			s.fams[mf.GetName()] = append(s.fams[mf.GetName()], toSeries(m))
		}
	}
	return s
}

func toSeries(m *dto.Metric) series {
	s := series{labels: make(map[string]string, len(m.GetLabel()))}
	pairs := make([]string, 0, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		s.labels[lp.GetName()] = lp.GetValue()
		pairs = append(pairs, lp.GetName()+"="+lp.GetValue())
	}
	sort.Strings(pairs)
	s.key = strings.Join(pairs, ",")
	switch {
	case m.Counter != nil:
		s.value = m.Counter.GetValue()
	case m.Gauge != nil:
		s.value = m.Gauge.GetValue()
	case m.Histogram != nil:
		s.value = float64(m.Histogram.GetSampleCount())
		for _, b := range m.Histogram.GetBucket() {
			s.buckets = append(s.buckets, bucket{le: b.GetUpperBound(), count: float64(b.GetCumulativeCount())})
		}
		s.buckets = append(s.buckets, bucket{le: math.Inf(1), count: s.value})
	}
	return s
}

// base picks the sample to subtract from newest: the latest kept sample
// at least over older than it, or, when the Window is younger, a zero
// sample at its start (the counters count from process start). Call it
// with w.mu held.
func (w *Window) base(newest sample, over time.Duration) sample {
	b := sample{at: w.started}
	if b.at.IsZero() || b.at.After(newest.at) {
		b.at = newest.at
	}
	for i := len(w.samples) - 1; i >= 0; i-- {
		if newest.at.Sub(w.samples[i].at) >= over {
			return w.samples[i]
		}
	}
	return b
}

func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func find(ss []series, key string) (series, bool) {
	for _, s := range ss {
		if s.key == key {
			return s, true
		}
	}
	return series{}, false
}

// Delta returns how much the counter name grew over the last over (from
// the kept sample that far back to a gather made now), summed over its
// series whose labels include match, and the span the figure covers
// (shorter than over while the Window is younger than over).
func (w *Window) Delta(name string, match map[string]string, over time.Duration) (delta float64, d time.Duration) {
	by, d := w.DeltaBy(name, "", match, over)
	return by[""], d
}

// DeltaBy is Delta grouped by the value of label (every series of a
// group summed; "" groups everything).
func (w *Window) DeltaBy(name, label string, match map[string]string, over time.Duration) (map[string]float64, time.Duration) {
	newest := w.gather()
	w.mu.Lock()
	defer w.mu.Unlock()
	base := w.base(newest, over)
	out := map[string]float64{}
	for _, s := range newest.fams[name] {
		if !matches(s.labels, match) {
			continue
		}
		v := s.value
		if b, found := find(base.fams[name], s.key); found && b.value <= v {
			v -= b.value
		}
		out[s.labels[label]] += v
	}
	return out, newest.at.Sub(base.at)
}

// Current returns the value of the gauge (or counter) name now, summed
// over its series whose labels include match; ok is false when it has no
// such series.
func (w *Window) Current(name string, match map[string]string) (float64, bool) {
	var sum float64
	found := false
	for _, s := range w.gather().fams[name] {
		if matches(s.labels, match) {
			sum += s.value
			found = true
		}
	}
	return sum, found
}

// Quantile returns the q-quantile (0 < q < 1) of the histogram name over
// the last over, from its buckets' growth (linear interpolation within a
// bucket, as PromQL's histogram_quantile), and how many observations it
// rests on; ok is false with no observation in the span.
func (w *Window) Quantile(name string, match map[string]string, q float64, over time.Duration) (value float64, n float64, ok bool) {
	newest := w.gather()
	w.mu.Lock()
	base := w.base(newest, over)
	w.mu.Unlock()
	var agg []bucket
	for _, s := range newest.fams[name] {
		if !matches(s.labels, match) || len(s.buckets) == 0 {
			continue
		}
		b, _ := find(base.fams[name], s.key)
		if agg == nil {
			agg = make([]bucket, len(s.buckets))
			for i := range agg {
				agg[i].le = s.buckets[i].le
			}
		}
		for i := range s.buckets {
			if i >= len(agg) {
				break
			}
			c := s.buckets[i].count
			if i < len(b.buckets) && b.buckets[i].count <= c {
				c -= b.buckets[i].count
			}
			agg[i].count += c
		}
	}
	if len(agg) == 0 || agg[len(agg)-1].count == 0 {
		return 0, 0, false
	}
	total := agg[len(agg)-1].count
	rank := q * total
	lower, prev := 0.0, 0.0
	for _, b := range agg {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower, total, true // above the largest bound: its bound
			}
			if b.count == prev {
				return b.le, total, true
			}
			return lower + (b.le-lower)*(rank-prev)/(b.count-prev), total, true
		}
		lower, prev = b.le, b.count
	}
	return lower, total, true
}
