package publish

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// The coalescing queue's bounds, each at its edge: a queue of exactly
// coalesceLimit bytes has no room (room, waitRoom), one byte less has;
// a connection closed while its flusher is idle refuses every later
// Write and waitRoom with net.ErrClosed; and a flushed batch's buffer is
// kept for reuse up to coalesceKeep bytes, let go past it.
func TestCoalescingConnRoomEndsAtTheLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		queued int
		room   bool
	}{{coalesceLimit - 1, true}, {coalesceLimit, false}, {coalesceLimit + 1, false}} {
		c := stalledSocket(t)
		if _, err := c.Write(make([]byte, tc.queued)); err != nil {
			t.Fatal(err)
		}
		if got := c.room(); got != tc.room {
			t.Errorf("%d bytes queued: room() = %v, want %v", tc.queued, got, tc.room)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := c.waitRoom(ctx)
		cancel()
		if tc.room && err != nil {
			t.Errorf("%d bytes queued: waitRoom = %v, want nil at once", tc.queued, err)
		}
		if !tc.room && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%d bytes queued: waitRoom = %v, want its deadline", tc.queued, err)
		}
		c.Close()
	}
}

func TestCoalescingConnClosedIdleRefusesEveryWrite(t *testing.T) {
	t.Parallel()
	client, _ := tcpPair(t)
	c := newCoalescingConn(client)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("frame")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close = %v, want net.ErrClosed", err)
	}
	if err := c.waitRoom(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("waitRoom after Close = %v, want net.ErrClosed", err)
	}
	if c.room() {
		t.Error("room() after Close = true, want false")
	}
}

func TestCoalescingConnKeepsOnlySmallBuffers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size int
		kept bool
	}{{1 << 10, true}, {coalesceKeep / 2, true}, {coalesceKeep, true}, {coalesceKeep + 1<<10, false}} {
		client, server := tcpPair(t)
		go func() { _, _ = io.Copy(io.Discard, server) }()
		c := newCoalescingConn(client)
		c.mu.Lock()
		c.pending = make([]byte, 0, tc.size) // the batch's capacity is its size: coalesceKeep itself is kept
		c.mu.Unlock()
		if _, err := c.Write(make([]byte, tc.size)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the batch written", c.idle)
		c.mu.Lock()
		kept := cap(c.spare) > 0
		c.mu.Unlock()
		if kept != tc.kept {
			t.Errorf("a batch of %d bytes: buffer kept for reuse = %v, want %v (up to %d bytes)", tc.size, kept, tc.kept, coalesceKeep)
		}
		c.Close()
	}
}
