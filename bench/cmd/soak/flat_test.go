package main

import (
	"testing"
	"time"

	"github.com/olp-edu/borda/bench/harness"
)

func series(fds ...int) []harness.Stats {
	out := make([]harness.Stats, len(fds))
	for i, n := range fds {
		out[i] = harness.Stats{RSSBytes: 32 << 20, Goroutines: 36, FDs: n}
	}
	return out
}

// A CI soak saw fds 23, 23, 36, 36, 36, 36: a pool that settled after the
// warm-up, not a leak; the -ci judge passes it, the full soak's does not
// (its warm-up is long enough for pools to settle inside it).
func TestFlatPassesAPoolThatSettledAfterTheWarmUpInTheCIRun(t *testing.T) {
	s := series(23, 23, 36, 36, 36, 36)
	if !flat(s, time.Minute, 10*time.Second, 0.10, true) {
		t.Error("the -ci judge failed a step that stayed flat")
	}
	if flat(s, time.Minute, 10*time.Second, 0.10, false) {
		t.Error("the strict judge passed a 56 % step")
	}
}

func TestFlatFailsFdsThatKeepGrowing(t *testing.T) {
	if flat(series(23, 23, 27, 31, 35, 39), time.Minute, 10*time.Second, 0.10, true) {
		t.Error("the -ci judge passed fds that grow in every sample")
	}
}
