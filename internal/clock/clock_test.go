package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

func TestOrIsTheWallClockForNil(t *testing.T) {
	if clock.Or(nil) != clock.Wall {
		t.Fatal("Or(nil) is not Wall")
	}
	m := clock.NewManual(time.Unix(10, 0))
	if clock.Or(m) != clock.Clock(m) {
		t.Fatal("Or(m) is not m")
	}
	before := time.Now()
	if got := clock.Wall.Now(); got.Before(before) {
		t.Fatalf("Wall.Now() = %v, before %v", got, before)
	}
}

func TestManualMovesOnlyWhenTold(t *testing.T) {
	m := clock.NewManual(time.Unix(100, 0))
	if got := m.Now(); !got.Equal(time.Unix(100, 0)) {
		t.Fatalf("Now = %v", got)
	}
	if got := m.Advance(1500 * time.Millisecond); !got.Equal(time.Unix(101, 5e8)) {
		t.Fatalf("Advance = %v", got)
	}
	m.Set(time.Unix(5, 0))
	if got := m.Now(); !got.Equal(time.Unix(5, 0)) {
		t.Fatalf("after Set, Now = %v", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { m.Advance(time.Second); _ = m.Now() })
	}
	wg.Wait()
	if got := m.Now(); !got.Equal(time.Unix(13, 0)) {
		t.Fatalf("after 8 concurrent Advances, Now = %v", got)
	}
}

func TestFuncIsAClock(t *testing.T) {
	at := time.Unix(42, 0)
	var c clock.Clock = clock.Func(func() time.Time { return at })
	if !c.Now().Equal(at) {
		t.Fatal("Func.Now did not call the function")
	}
}

func TestManualAfterFiresWhenAdvancedPastIt(t *testing.T) {
	m := clock.NewManual(time.Unix(100, 0))
	ch := m.After(2 * time.Second)
	if m.Waiters() != 1 {
		t.Fatalf("Waiters = %d, want 1", m.Waiters())
	}
	m.Advance(time.Second)
	select {
	case <-ch:
		t.Fatal("After(2s) fired 1s in")
	default:
	}
	m.Advance(time.Second)
	select {
	case at := <-ch:
		if !at.Equal(time.Unix(102, 0)) {
			t.Fatalf("fired with %v", at)
		}
	default:
		t.Fatal("After(2s) did not fire 2s in")
	}
	if m.Waiters() != 0 {
		t.Fatalf("Waiters = %d after firing, want 0", m.Waiters())
	}
	late := m.After(time.Hour)
	m.Set(time.Unix(102, 0).Add(time.Hour))
	select {
	case <-late:
	default:
		t.Fatal("Set past the deadline did not fire After")
	}
	select {
	case <-m.After(0):
	default:
		t.Fatal("After(0) did not fire at once")
	}
}

func TestAfterOnTheWallClockIsATimer(t *testing.T) {
	ch, stop := clock.After(nil, time.Millisecond)
	defer stop()
	<-ch // a wall-clock timer: fires by itself
	m := clock.NewManual(time.Unix(0, 0))
	mch, mstop := clock.After(m, time.Second)
	defer mstop()
	if m.Waiters() != 1 {
		t.Fatal("After on a Manual clock did not wait on it")
	}
	m.Advance(time.Second)
	<-mch
}
