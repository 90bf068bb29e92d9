package gateway

import (
	"runtime/debug"
	"sync"
	"time"
)

// After a burst of connections the memory their goroutines and buffers
// held (about 19 KB each, BenchmarkIdleConnectionMemory) is free heap,
// but an idle gateway allocates too little to run a collection, so the
// heap goal stays at the burst's size and the runtime's background
// scavenger keeps the pages: RSS stayed at the peak (4 000 connections
// closed: +24 KB per connection still resident 90 s later). burstRelease
// returns them once per burst: when the open connections fall to a
// quarter of a peak of at least burstMin, it runs debug.FreeOSMemory (a
// forced collection and a scavenge, off the request path) in its own goroutine,
// at most once per releaseEvery; the next burst finds the pages again.
const (
	burstMin     = 1024
	releaseEvery = time.Minute
)

// burstRelease tracks a listener's peak of open connections.
type burstRelease struct {
	min     int              // the smallest peak worth a release (burstMin)
	every   time.Duration    // releaseEvery
	now     func() time.Time // time.Now; tests inject a clock
	release func()           // debug.FreeOSMemory; tests count calls

	mu      sync.Mutex
	peak    int
	last    time.Time
	running bool
	started int // releases started
}

func newBurstRelease() *burstRelease {
	return &burstRelease{min: burstMin, every: releaseEvery, now: time.Now, release: debug.FreeOSMemory}
}

// opened records open connections after an accept.
func (b *burstRelease) opened(open int) {
	b.mu.Lock()
	b.peak = max(b.peak, open)
	b.mu.Unlock()
}

// closed records open connections after a close and starts the release
// when they fell to a quarter of a large enough peak. It never blocks.
func (b *burstRelease) closed(open int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peak < b.min || open > b.peak/4 || b.running {
		return
	}
	now := b.now()
	if !b.last.IsZero() && now.Sub(b.last) < b.every {
		return
	}
	b.peak, b.last, b.running = open, now, true
	b.started++
	go func() {
		b.release()
		b.mu.Lock()
		b.running = false
		b.mu.Unlock()
	}()
}
