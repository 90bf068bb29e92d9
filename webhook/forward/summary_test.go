package forward

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/servicetest"
)

// TestRunSummaryLogsWhatTheIntervalDid: `borda forward` logged nothing for
// a delivery or a duplicate; RunSummary logs, at info, the interval's
// delivered, duplicates, retried and dead-lettered counts and the breaker.
func TestRunSummaryLogsWhatTheIntervalDid(t *testing.T) {
	f, buf := summaryForwarder(t)
	m := f.m
	m.outcomes.WithLabelValues("delivered", "2xx").Add(2)
	m.outcomes.WithLabelValues("duplicate", "none").Inc()
	m.outcomes.WithLabelValues("dead_lettered", "4xx").Inc()
	m.outcomes.WithLabelValues("retried", "5xx").Inc() // before the baseline: not this interval's
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.RunSummary(ctx, 5*time.Millisecond); close(done) }()
	// The totals before the first tick are the baseline: once a line
	// shows it, count more and wait for a line that has them.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), "delivered_total=2") {
		if time.Now().After(deadline) {
			t.Fatalf("no first summary line:\n%s", buf.String())
		}
		time.Sleep(time.Millisecond)
	}
	m.outcomes.WithLabelValues("delivered", "2xx").Add(3)
	m.outcomes.WithLabelValues("retried", "5xx").Inc()
	// Each Add is atomic, but the two may fall in two intervals.
	want := "delivered=3 duplicates=0 retried="
	for !strings.Contains(buf.String(), want) || !strings.Contains(buf.String(), "retried=1 dead_lettered=0 delivered_total=5 dead_lettered_total=1 breaker=closed") {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("no summary line with %q:\n%s", want, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if !strings.Contains(buf.String(), "level=INFO msg=\"forward summary\"") {
		t.Errorf("the summary is not at info:\n%s", buf.String())
	}
}

// RunSummary's every of 0 means DefaultSummaryEvery (a zero ticker would
// panic): it runs until its ctx ends and logs nothing before a minute.
func TestRunSummaryWithoutAnIntervalUsesTheDefault(t *testing.T) {
	f, buf := summaryForwarder(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f.RunSummary(ctx, 0)
	}()
	cancel()
	if p := <-done; p != nil {
		t.Fatalf("RunSummary(ctx, 0) panicked: %v", p)
	}
	if buf.String() != "" {
		t.Errorf("RunSummary logged before its interval:\n%s", buf.String())
	}
}

// summaryForwarder is a Forwarder with what RunSummary reads (metrics, a
// closed breaker) logging into the returned buffer.
func summaryForwarder(t *testing.T) (*Forwarder, *servicetest.LogBuffer) {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	buf := &servicetest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(buf, nil))
	return &Forwarder{m: m, log: log, now: time.Now, breaker: newBreaker(3, time.Minute, senderSet{}, nil, m.breaker, log)}, buf
}
