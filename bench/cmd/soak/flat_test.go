package main

import (
	"testing"
	"time"

	"github.com/olp-edu/borda/bench/harness"
)

func series(fds ...int) []harness.Stats {
	out := make([]harness.Stats, len(fds))
	for i, n := range fds {
		out[i] = harness.Stats{RSSBytes: 32 << 20, HeapLiveBytes: 6 << 20, Goroutines: 36, FDs: n}
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

// withRSS and withHeap give series of memory samples, MiB.
func withRSS(mib ...float64) []harness.Stats {
	out := series(make([]int, len(mib))...)
	for i, m := range mib {
		out[i].FDs = 40
		out[i].RSSBytes = int64(m * (1 << 20))
	}
	return out
}

func withHeap(mib ...float64) []harness.Stats {
	out := withRSS(make([]float64, len(mib))...)
	for i, m := range mib {
		out[i].RSSBytes = 32 << 20
		out[i].HeapLiveBytes = int64(m * (1 << 20))
	}
	return out
}

// The CI soak of 2026-12-07 failed on RSS 32.7, 34.0, 34.7, 37.5, 37.7,
// 38.4 MiB in one minute of flat load: the GC pacer's target settling,
// which the live heap does not show. The -ci judge reports RSS; the full
// run's judge still fails it.
func TestFlatReportsButDoesNotJudgeRSSInTheCIRun(t *testing.T) {
	s := withRSS(32.7, 34.0, 34.7, 37.5, 37.7, 38.4)
	if !flat(s, time.Minute, 10*time.Second, 0.10, true) {
		t.Error("the -ci judge failed RSS growth with a flat live heap")
	}
	if flat(s, time.Minute, 10*time.Second, 0.10, false) {
		t.Error("the full run's judge passed 12 % of RSS growth")
	}
}

// A leak shows in the live heap after a forced collection: both judges
// fail a heap that grows past the allowance, and pass one within it.
func TestFlatJudgesTheLiveHeap(t *testing.T) {
	growing := withHeap(6, 6.1, 6.6, 7.0, 7.5, 8.0)
	if flat(growing, time.Minute, 10*time.Second, 0.10, true) {
		t.Error("the -ci judge passed a live heap grown by 1.65 MiB (27 %)")
	}
	if flat(growing, time.Minute, 10*time.Second, 0.10, false) {
		t.Error("the full run's judge passed a live heap grown by 27 %")
	}
	within := withHeap(6, 6.1, 6.3, 6.5, 6.6, 6.9)
	if !flat(within, time.Minute, 10*time.Second, 0.10, true) {
		t.Error("the -ci judge failed a live heap within +1 MiB")
	}
	if flat(within, time.Minute, 10*time.Second, 0.10, false) {
		t.Error("the full run's judge passed 11 % of live-heap growth")
	}
}

// A sample without the live heap (the admin listener answered no heap
// profile) fails the run instead of passing it unmeasured.
func TestFlatFailsWhenTheHeapWasNotSampled(t *testing.T) {
	s := withHeap(6, 6, 6, 6, 6, 6)
	s[5].HeapLiveBytes = -1
	if flat(s, time.Minute, 10*time.Second, 0.10, true) {
		t.Error("the judge passed a run whose live heap was not sampled")
	}
}
