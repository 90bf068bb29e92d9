package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/backoff"
	"github.com/olp-edu/borda/internal/clock"
)

// loop runs Supervise on a Manual clock; each session returns what the
// test sends on results, and each onDown is sent on downs.
type loop struct {
	clk     *clock.Manual
	results chan bool // a session's connected; its error names the session
	downs   chan down
	done    chan struct{}
	cancel  context.CancelFunc
}

type down struct {
	err  error
	wait time.Duration
}

func startLoop(t *testing.T, p backoff.Policy) *loop {
	t.Helper()
	l := &loop{
		clk:     clock.NewManual(time.Unix(1000, 0)),
		results: make(chan bool),
		downs:   make(chan down, 1),
		done:    make(chan struct{}),
	}
	p.Clock = l.clk
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	sessions := 0
	go func() {
		defer close(l.done)
		backoff.Supervise(ctx, p, func(ctx context.Context) (bool, error) {
			sessions++
			select {
			case connected := <-l.results:
				return connected, fmt.Errorf("session %d ended", sessions)
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}, func(err error, wait time.Duration) { l.downs <- down{err, wait} })
	}()
	t.Cleanup(func() { cancel(); <-l.done })
	return l
}

// end ends the running session (connected or not) and returns the wait
// Supervise began, after checking that it waits on the clock for exactly
// that long: one nanosecond short the wait is still pending (Advance
// fires due waits synchronously), at the wait it is over.
func (l *loop) end(t *testing.T, connected bool) time.Duration {
	t.Helper()
	l.results <- connected
	d := <-l.downs
	if d.err == nil {
		t.Fatal("onDown got no error")
	}
	if n := l.clk.Waiters(); n != 1 {
		t.Fatalf("after onDown, %d waits pending on the clock, want 1", n)
	}
	l.clk.Advance(d.wait - 1)
	if n := l.clk.Waiters(); n != 1 {
		t.Fatalf("the wait of %s ended 1ns early", d.wait)
	}
	l.clk.Advance(1)
	if n := l.clk.Waiters(); n != 0 {
		t.Fatalf("the wait of %s did not end on time", d.wait)
	}
	return d.wait
}

func within(t *testing.T, i int, wait, base time.Duration) {
	t.Helper()
	if wait < base/2 || wait > base {
		t.Fatalf("wait %d = %s, want within [%s, %s]", i, wait, base/2, base)
	}
}

func TestSuperviseGrowsTheWaitUpToTheCap(t *testing.T) {
	l := startLoop(t, backoff.Policy{First: 100 * time.Millisecond, Max: time.Second})
	bases := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, b := range bases {
		within(t, i, l.end(t, false), b*time.Millisecond)
	}
}

func TestSuperviseCapDefaultsAndNeverUndercutsFirst(t *testing.T) {
	for _, c := range []struct {
		first, max, cap time.Duration
	}{
		{2 * time.Second, 0, backoff.DefaultMax},
		{10 * time.Second, 0, 10 * time.Second},
		{time.Second, 500 * time.Millisecond, time.Second},
	} {
		t.Run(fmt.Sprint(c.first, "/", c.max), func(t *testing.T) {
			l := startLoop(t, backoff.Policy{First: c.first, Max: c.max})
			for range 12 {
				l.end(t, false)
			}
			within(t, 12, l.end(t, false), c.cap)
		})
	}
}

func TestSuperviseJittersWithinHalfToFullBase(t *testing.T) {
	l := startLoop(t, backoff.Policy{First: time.Second, Max: time.Second})
	seen := map[time.Duration]bool{}
	for i := range 200 {
		w := l.end(t, false)
		within(t, i, w, time.Second)
		seen[w] = true
	}
	if len(seen) < 100 {
		t.Fatalf("200 waits took %d distinct values: not jittered", len(seen))
	}
}

func TestSuperviseStartsAgainAfterAConnectedSession(t *testing.T) {
	l := startLoop(t, backoff.Policy{First: 100 * time.Millisecond, Max: 10 * time.Second})
	for range 5 { // base 1.6 s next
		l.end(t, false)
	}
	within(t, 5, l.end(t, true), 100*time.Millisecond)
	within(t, 6, l.end(t, false), 200*time.Millisecond)
	within(t, 7, l.end(t, false), 400*time.Millisecond)
}

func TestSuperviseReturnsAtOnceWhenCtxEndsDuringAWait(t *testing.T) {
	t.Run("manual clock", func(t *testing.T) {
		l := startLoop(t, backoff.Policy{First: time.Hour})
		l.results <- false
		<-l.downs
		l.cancel()
		<-l.done // the clock never moved: only ctx ended the wait
	})
	t.Run("wall clock", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		waiting := make(chan time.Duration, 1)
		go func() {
			defer close(done)
			backoff.Supervise(ctx, backoff.Policy{First: time.Hour}, func(context.Context) (bool, error) {
				return false, errors.New("refused")
			}, func(_ error, wait time.Duration) { waiting <- wait })
		}()
		if w := <-waiting; w < 30*time.Minute {
			t.Fatalf("wait %s, want at least half an hour", w)
		}
		start := time.Now()
		cancel()
		<-done
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("Supervise returned %s after ctx ended", took)
		}
	})
}

func TestSuperviseReturnsWithoutOnDownWhenCtxEndsDuringASession(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sessions := 0
	backoff.Supervise(ctx, backoff.Policy{First: time.Hour}, func(context.Context) (bool, error) {
		sessions++
		cancel()
		return true, context.Canceled
	}, func(err error, _ time.Duration) { t.Errorf("onDown(%v) after ctx ended", err) })
	if sessions != 1 {
		t.Fatalf("%d sessions, want 1", sessions)
	}
}

func TestSupervisePanicsWithoutAFirstWait(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Supervise took a First of 0")
		}
	}()
	backoff.Supervise(context.Background(), backoff.Policy{}, nil, nil)
}
