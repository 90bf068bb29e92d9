package startstop_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/internal/startstop/startstoptest"
)

// recording is a Service that notes its starts and stops in a shared log.
type recording struct {
	name    string
	log     *[]string
	mu      *sync.Mutex
	failure error
}

func (r recording) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure != nil {
		return r.failure
	}
	*r.log = append(*r.log, "start "+r.name)
	return nil
}

func (r recording) Stop(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, "stop "+r.name)
	return nil
}

func TestListStartsInOrderAndStopsInReverse(t *testing.T) {
	var log []string
	var mu sync.Mutex
	var l startstop.List
	for _, n := range []string{"a", "b", "c"} {
		if err := l.Add(n, recording{name: n, log: &log, mu: &mu}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatalf("second Start = %v, want nil", err)
	}
	if err := l.Add("d", recording{name: "d", log: &log, mu: &mu}); err == nil {
		t.Error("Add after Start accepted")
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop = %v, want nil", err)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("log %q, want %q", log, want)
	}
}

func TestListStopsWhatItStartedWhenOneFails(t *testing.T) {
	var log []string
	var mu sync.Mutex
	var l startstop.List
	boom := errors.New("boom")
	_ = l.Add("a", recording{name: "a", log: &log, mu: &mu})
	_ = l.Add("b", recording{name: "b", log: &log, mu: &mu, failure: boom})
	_ = l.Add("c", recording{name: "c", log: &log, mu: &mu})
	err := l.Start(context.Background())
	if !errors.Is(err, boom) || err.Error() != "starting b: boom" {
		t.Fatalf("Start = %v, want starting b: boom", err)
	}
	if want := []string{"start a", "stop a"}; !slices.Equal(log, want) {
		t.Fatalf("log %q, want %q", log, want)
	}
}

func TestUnboundedStopWaitsPastTheDeadline(t *testing.T) {
	release := make(chan struct{})
	ended := make(chan struct{})
	svc := startstop.Unbounded(startstop.Loop(func(ctx context.Context) {
		<-ctx.Done()
		<-release
		close(ended)
	}))
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	go close(release)
	if err := svc.Stop(ctx); err != nil {
		t.Fatalf("Stop = %v, want nil", err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Stop returned before the loop ended")
	}
}

func TestRunnerSurvivesConcurrentStartStop(t *testing.T) {
	for range 20 {
		startstoptest.Stress(t, startstop.Loop(func(ctx context.Context) { <-ctx.Done() }))
	}
}

func TestListSurvivesConcurrentStartStop(t *testing.T) {
	for range 20 {
		var l startstop.List
		for _, n := range []string{"a", "b", "c"} {
			_ = l.Add(n, startstop.Loop(func(ctx context.Context) { <-ctx.Done() }))
		}
		startstoptest.Stress(t, &l)
	}
}
