package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// waitFor polls cond (bounded: 10 s), for state the flusher changes on
// its own goroutine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

func (c *coalescingConn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) == 0 && !c.writing
}

// Concurrent writers' bytes reach the socket whole and in the order their
// Writes returned (amqp091-go serialises its frames under its own lock,
// as the mutex here does).
func TestCoalescingConnKeepsOrderAndBytes(t *testing.T) {
	t.Parallel()
	client, server := tcpPair(t)
	c := newCoalescingConn(client)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(server)
		got <- b
	}()
	var (
		mu    sync.Mutex
		order []byte
		wg    sync.WaitGroup
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				frame := fmt.Appendf(nil, "<%d:%03d>", w, i)
				mu.Lock()
				if _, err := c.Write(frame); err != nil {
					mu.Unlock()
					t.Error(err)
					return
				}
				order = append(order, frame...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	waitFor(t, "queue written", c.idle)
	c.Close()
	if read := <-got; !bytes.Equal(read, order) {
		t.Fatalf("the socket got %d bytes, not the %d written in their order", len(read), len(order))
	}
}

// A failed socket write is not lost: the connection closes (so amqp091-go's
// reader fails and outstanding confirms resolve as errors) and every later
// Write returns the error.
func TestCoalescingConnWriteErrorClosesAndSticks(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	server.Close() // every write to client fails
	c := newCoalescingConn(client)
	var err error
	waitFor(t, "a Write reporting the socket's error", func() bool {
		_, err = c.Write([]byte("frame"))
		return err != nil
	})
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Write = %v, want the socket's error", err)
	}
	if _, rerr := client.Read(make([]byte, 1)); !errors.Is(rerr, io.ErrClosedPipe) {
		t.Fatalf("the socket is still open after the write error: Read = %v", rerr)
	}
}

// stalledConn is a socket whose writes never complete until it is closed,
// as when the broker stops reading.
type stalledConn struct {
	net.Conn // nil: only Write and Close are used
	closed   chan struct{}
	once     sync.Once
}

func (s *stalledConn) Write(p []byte) (int, error) {
	<-s.closed
	return 0, net.ErrClosed
}

func (s *stalledConn) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// While a batch is being written the queue fills again up to its limit
// (Writes used to wait for the whole batch's write, with the queue
// empty), a publisher waiting for room (the broker stopped reading) gives
// up at its deadline, and one waiting returns when the connection is
// closed instead of hanging. Write itself never waits.
func TestCoalescingConnQueueRefillsDuringAWriteAndCloseReleasesWriters(t *testing.T) {
	t.Parallel()
	c := newCoalescingConn(&stalledConn{closed: make(chan struct{})})
	done := make(chan error, 1)
	go func() {
		chunk := make([]byte, 256<<10)
		for {
			if err := c.waitRoom(context.Background()); err != nil {
				done <- err
				return
			}
			if _, err := c.Write(chunk); err != nil {
				done <- err
				return
			}
		}
	}()
	// The flusher must be inside its (stalled) socket write: until it
	// takes its first batch, a queue at the limit is still about to be
	// emptied into that batch (a CI run saw waitRoom return nil when the
	// flusher was scheduled late and took the whole full queue).
	waitFor(t, "the queue at its limit behind a stalled write", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writing && len(c.pending) >= coalesceLimit
	})
	c.mu.Lock()
	queued := len(c.pending)
	c.mu.Unlock()
	if queued > coalesceLimit+256<<10 {
		t.Errorf("%d bytes queued, want at most the limit plus one write (%d)", queued, coalesceLimit+256<<10)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.waitRoom(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waitRoom on a full queue = %v, want its deadline", err)
	}
	if _, err := c.Write([]byte("heartbeat")); err != nil {
		t.Fatalf("Write on a full queue = %v, want it queued without waiting", err)
	}
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("blocked writer returned %v, want net.ErrClosed", err)
	}
}
