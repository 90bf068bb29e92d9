package publish

import (
	"context"
	"net"
	"sync"
)

// coalesceLimit is how many bytes may be queued before a publish waits
// for the socket (waitRoom): a broker that stops reading (a memory alarm,
// a stalled link) holds publishes back instead of growing the queue
// without bound.
const coalesceLimit = 1 << 20

// coalesceKeep is the largest buffer kept for reuse after a flush; a 10 MB
// envelope's buffer is let go.
const coalesceKeep = 256 << 10

// coalescingConn is the publishing connection's socket. amqp091-go flushes
// every publish with its own write(2), so publishes never share a segment
// and the broker reads, and is woken, once per message. Write here copies
// into a queue and returns; one flusher goroutine writes whatever has
// queued in one write(2), so publishes that arrive while a write is in
// progress leave together.
//
// Order is kept (one queue, one writer). A write error is kept: the
// connection is closed, so amqp091-go's reader fails and every publish
// awaiting a confirm gets an error (never an ack), and every later Write
// returns the error.
//
// Write never waits for the socket, so a publish can be written on the
// caller's own goroutine and still answer by its deadline: a publisher
// first waits, within its deadline, until fewer than coalesceLimit bytes
// are queued (waitRoom), then writes. The queue holds at most
// coalesceLimit plus one message per publishing channel plus amqp091-go's
// own small frames (heartbeats, RPCs), beside the batch being written.
type coalescingConn struct {
	net.Conn

	mu      sync.Mutex
	drained *sync.Cond // signalled when the queue shrinks or err is set
	pending []byte
	spare   []byte
	err     error // first write error, or net.ErrClosed after Close
	writing bool  // the flusher is in a socket write
	wake    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c, wake: make(chan struct{}, 1), done: make(chan struct{})}
	cc.drained = sync.NewCond(&cc.mu)
	go cc.flusher()
	return cc
}

// Write queues p and returns len(p), or the connection's error. It does
// not wait for the socket.
func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.pending = append(c.pending, p...)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // the flusher is already due to run
	}
	return len(p), nil
}

// room reports whether fewer than coalesceLimit bytes are queued (a
// publish may write at once).
func (c *coalescingConn) room() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && len(c.pending) < coalesceLimit
}

// waitRoom returns nil once fewer than coalesceLimit bytes are queued, the
// connection's error once it has one, or ctx's error when ctx ends first.
func (c *coalescingConn) waitRoom(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && len(c.pending) < coalesceLimit {
		return nil // the common case: no waiting, no context watch
	}
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.drained.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	for c.err == nil && len(c.pending) >= coalesceLimit {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.drained.Wait()
	}
	return c.err
}

// Close stops the flusher and closes the socket; queued bytes not yet
// written are dropped (amqp091-go closes only after connection.close-ok,
// or on an error, when nothing queued matters).
func (c *coalescingConn) Close() error {
	var err error
	c.once.Do(func() {
		c.mu.Lock()
		if c.err == nil {
			c.err = net.ErrClosed
		}
		c.drained.Broadcast()
		c.mu.Unlock()
		close(c.done)
		err = c.Conn.Close()
	})
	return err
}

func (c *coalescingConn) flusher() {
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		for len(c.pending) > 0 && c.err == nil {
			batch := c.pending
			c.pending, c.spare = c.spare[:0], nil
			c.writing = true
			c.drained.Broadcast() // the queue has room again while this batch is written
			c.mu.Unlock()
			_, err := c.Conn.Write(batch)
			c.mu.Lock()
			c.writing = false
			if cap(batch) <= coalesceKeep {
				c.spare = batch[:0]
			}
			if err != nil && c.err == nil {
				c.err = err
				_ = c.Conn.Close() // the reader fails: outstanding confirms resolve as errors
			}
			c.drained.Broadcast()
		}
		c.mu.Unlock()
	}
}
