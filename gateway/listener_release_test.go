package gateway

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestBurstOfConnectionsReturnsMemoryOnce: after 4 000 connections left,
// their memory stayed resident (an idle process runs no collection, so
// the scavenger keeps the pages). When the open connections fall to a
// quarter of a large peak the listener releases memory once, not again
// within releaseEvery, and again for a burst after it.
func TestBurstOfConnectionsReturnsMemoryOnce(t *testing.T) {
	h := newHarness(t, routes(testRoute(t, "api", "http://127.0.0.1:1")))
	s := h.srv
	s.maxConnsPerIP = 0
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := s.Listener(ln).(*limitListener)
	var mu sync.Mutex
	clock := time.Unix(1e9, 0)
	releases := func() int { lim.burst.mu.Lock(); defer lim.burst.mu.Unlock(); return lim.burst.started }
	released := make(chan struct{}, 4)
	lim.burst.min = 8
	lim.burst.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	lim.burst.release = func() { released <- struct{}{} }
	srv := s.HTTPServer("", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	go func() { _ = srv.Serve(lim) }()
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	burst := func(n int) {
		conns := make([]net.Conn, 0, n)
		for range n {
			c, _ := idleConn(t, addr)
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(lim.sem) > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if len(lim.sem) > 0 {
			t.Fatalf("%d connections still open after the clients left", len(lim.sem))
		}
	}
	waitRelease := func() {
		select {
		case <-released:
		case <-time.After(10 * time.Second):
			t.Fatal("no release after the burst")
		}
	}

	burst(4) // below the peak worth a release
	burst(10)
	waitRelease()
	if n := releases(); n != 1 {
		t.Fatalf("%d releases after a small and a large burst (want 1)", n)
	}
	burst(10) // within releaseEvery: none
	if n := releases(); n != 1 {
		t.Fatalf("%d releases after a second burst within a minute (want 1)", n)
	}
	mu.Lock()
	clock = clock.Add(releaseEvery)
	mu.Unlock()
	burst(10)
	waitRelease()
	if n := releases(); n != 2 {
		t.Fatalf("%d releases after a burst a minute later (want 2)", n)
	}
}

// TestBurstReleaseStartsAtAQuarterOfAPeakOfAtLeastMin: a peak of exactly
// min is a burst, one below it is not; the release starts when the open
// connections fall to a quarter of the peak, not one above it.
func TestBurstReleaseStartsAtAQuarterOfAPeakOfAtLeastMin(t *testing.T) {
	released := make(chan struct{}, 4)
	newB := func() *burstRelease {
		return &burstRelease{min: 8, every: time.Minute, now: func() time.Time { return time.Unix(1e9, 0) },
			release: func() { released <- struct{}{} }}
	}
	started := func(b *burstRelease) int { b.mu.Lock(); defer b.mu.Unlock(); return b.started }

	small := newB()
	small.opened(7)
	small.closed(0)
	if n := started(small); n != 0 {
		t.Fatalf("a peak of 7 (min 8) started %d releases, want 0", n)
	}
	b := newB()
	b.opened(8)
	b.closed(3)
	if n := started(b); n != 0 {
		t.Fatalf("3 open of a peak of 8 started %d releases, want 0 (a quarter is 2)", n)
	}
	b.closed(2)
	if n := started(b); n != 1 {
		t.Fatalf("2 open of a peak of 8 started %d releases, want 1", n)
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the release started but never ran")
	}
}

// TestBurstReleaseCountsTheConnectionThatCloses: the listener reports the
// connections left open after each close, so closing 6 of a peak of 8
// (2 left, a quarter) starts the release.
func TestBurstReleaseCountsTheConnectionThatCloses(t *testing.T) {
	released := make(chan struct{}, 4)
	_, addr, lim := capHarness(t, 0, 0, func(l *limitListener) {
		l.burst.min = 8
		l.burst.release = func() { released <- struct{}{} }
	})
	conns := make([]net.Conn, 0, 8)
	for range 8 {
		c, _ := idleConn(t, addr)
		conns = append(conns, c)
	}
	for _, c := range conns[:6] {
		c.Close()
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatalf("no release with 2 of a peak of 8 connections left (%d open)", len(lim.sem))
	}
}
