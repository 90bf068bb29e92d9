package breaker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/breaker"
	"github.com/olp-edu/borda/internal/clock"
)

var (
	errDown    = errors.New("down")
	errSkipped = errors.New("skipped")
)

type transition struct{ from, to breaker.State }

func newBreaker(t *testing.T, failures int, openFor time.Duration) (*breaker.Breaker, *clock.Manual, *[]transition) {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	var seen []transition
	b := breaker.New(breaker.Options{
		Failures: failures, OpenFor: openFor, Clock: clk,
		IsExcluded:    func(err error) bool { return errors.Is(err, errSkipped) },
		OnStateChange: func(from, to breaker.State) { seen = append(seen, transition{from, to}) },
	})
	return b, clk, &seen
}

func report(t *testing.T, b *breaker.Breaker, err error) {
	t.Helper()
	done, aerr := b.Allow()
	if aerr != nil {
		t.Fatalf("Allow refused: %v", aerr)
	}
	done(err)
}

func TestConsecutiveFailuresOpenItAndASuccessResetsThem(t *testing.T) {
	b, _, _ := newBreaker(t, 3, time.Second)
	report(t, b, errDown)
	report(t, b, errDown)
	report(t, b, nil) // resets
	report(t, b, errDown)
	report(t, b, errSkipped) // counts neither way
	report(t, b, errDown)
	if s := b.State(); s != breaker.StateClosed {
		t.Fatalf("after 2 consecutive failures, state %s, want closed", s)
	}
	report(t, b, errDown)
	if s := b.State(); s != breaker.StateOpen {
		t.Fatalf("after 3 consecutive failures, state %s, want open", s)
	}
	if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("Allow while open = %v, want ErrOpen", err)
	}
}

func TestTheOpenPeriodIsTheClocks(t *testing.T) {
	b, clk, seen := newBreaker(t, 1, 1500*time.Millisecond)
	report(t, b, errDown)
	clk.Advance(1500 * time.Millisecond) // the open period's last instant: still open
	if s := b.State(); s != breaker.StateOpen {
		t.Fatalf("at OpenFor, state %s, want open", s)
	}
	clk.Advance(time.Nanosecond)
	if s := b.State(); s != breaker.StateHalfOpen {
		t.Fatalf("past OpenFor, state %s, want half-open", s)
	}
	// One probe at a time; an excluded one frees the slot.
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Allow(); !errors.Is(err, breaker.ErrTooManyRequests) {
		t.Fatalf("second probe = %v, want ErrTooManyRequests", err)
	}
	done(errSkipped)
	done, err = b.Allow()
	if err != nil {
		t.Fatalf("probe after an excluded one refused: %v", err)
	}
	done(errDown) // the probe fails: open again, for a new period
	if s := b.State(); s != breaker.StateOpen {
		t.Fatalf("after a failed probe, state %s, want open", s)
	}
	clk.Advance(1501 * time.Millisecond)
	report(t, b, nil)
	if s := b.State(); s != breaker.StateClosed {
		t.Fatalf("after a good probe, state %s, want closed", s)
	}
	want := []transition{
		{breaker.StateClosed, breaker.StateOpen}, {breaker.StateOpen, breaker.StateHalfOpen},
		{breaker.StateHalfOpen, breaker.StateOpen}, {breaker.StateOpen, breaker.StateHalfOpen},
		{breaker.StateHalfOpen, breaker.StateClosed},
	}
	if len(*seen) != len(want) {
		t.Fatalf("transitions %v, want %v", *seen, want)
	}
	for i := range want {
		if (*seen)[i] != want[i] {
			t.Fatalf("transitions %v, want %v", *seen, want)
		}
	}
}

func TestAResultFromAnEarlierStateIsIgnored(t *testing.T) {
	b, clk, _ := newBreaker(t, 1, time.Second)
	late, err := b.Allow() // admitted while closed
	if err != nil {
		t.Fatal(err)
	}
	report(t, b, errDown) // opens
	clk.Advance(2 * time.Second)
	late(nil) // from the closed period: must not close the half-open breaker
	if s := b.State(); s != breaker.StateHalfOpen {
		t.Fatalf("state %s after a stale success, want half-open", s)
	}
}

func TestExecuteRefusesWithoutRunningAndCountsAPanic(t *testing.T) {
	b, _, _ := newBreaker(t, 1, time.Second)
	func() {
		defer func() { _ = recover() }()
		_ = b.Execute(func() error { panic("boom") })
	}()
	ran := false
	if err := b.Execute(func() error { ran = true; return nil }); !errors.Is(err, breaker.ErrOpen) || ran {
		t.Fatalf("Execute after a panic = %v (ran %v), want ErrOpen without running", err, ran)
	}
}

func TestStateStrings(t *testing.T) {
	for s, want := range map[breaker.State]string{breaker.StateClosed: "closed", breaker.StateHalfOpen: "half-open", breaker.StateOpen: "open"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
}
