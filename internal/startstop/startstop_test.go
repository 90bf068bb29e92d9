package startstop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/startstop"
)

func TestStopWithoutStartReturnsNil(t *testing.T) {
	var r startstop.Runner
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start = %v, want nil", err)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop = %v, want nil", err)
	}
}

func TestDoubleStartRunsOneLoopAndDoubleStopIsHarmless(t *testing.T) {
	var r startstop.Runner
	runs := make(chan struct{}, 2)
	loop := func(ctx context.Context) { runs <- struct{}{}; <-ctx.Done() }
	if err := r.Start(context.Background(), loop); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), loop); err != nil {
		t.Fatalf("second Start = %v, want nil", err)
	}
	<-runs
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	select {
	case <-r.Stopped():
	default:
		t.Fatal("Stopped not closed after Stop returned")
	}
	if len(runs) != 0 {
		t.Fatal("the second Start ran a second loop")
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop = %v, want nil", err)
	}
	if err := r.Start(context.Background(), loop); !errors.Is(err, startstop.ErrStopped) {
		t.Fatalf("Start after Stop = %v, want ErrStopped", err)
	}
}

func TestStopGivesUpAtItsDeadline(t *testing.T) {
	var r startstop.Runner
	release := make(chan struct{})
	_ = r.Start(context.Background(), func(context.Context) { <-release })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an ended context = %v, want context.Canceled", err)
	}
	close(release)
	select {
	case <-r.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("loop did not finish after release")
	}
}

func TestParentContextEndsTheLoop(t *testing.T) {
	var r startstop.Runner
	ctx, cancel := context.WithCancel(context.Background())
	_ = r.Start(ctx, func(ctx context.Context) { <-ctx.Done() })
	cancel()
	select {
	case <-r.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("loop did not end with its parent context")
	}
}
