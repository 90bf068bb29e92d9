package restconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// errNothingSent is a read with no command written since the last
// replies: a RESP server would block until the deadline; REST has nothing
// to ask, so the read fails at once.
var errNothingSent = errors.New("restconn: read with no command written (REST answers requests only; nothing is pushed)")

// Dialer returns a go-redis Options.Dialer whose connections carry their
// commands over c. It does no I/O: the first command makes the first
// request, so a client starts while the endpoint is down.
func Dialer(c *Client) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) {
		return newConn(c), nil
	}
}

// Conn is one go-redis connection over the REST API: the commands written
// since the last read travel in one request when read (package doc).
// go-redis uses a connection from one goroutine at a time; Close may come
// from another and aborts a request in flight.
type Conn struct {
	client *Client
	ctx    context.Context // ended by Close
	cancel context.CancelFunc

	mu            sync.Mutex
	written       []byte // RESP commands not yet sent
	replies       []byte // RESP replies not yet read
	readDeadline  time.Time
	writeDeadline time.Time
	closed        bool
}

func newConn(c *Client) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &Conn{client: c, ctx: ctx, cancel: cancel}
}

// Write queues RESP commands for the next Read. Errors: net.ErrClosed, a
// timeout when the write deadline has passed.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	if !c.writeDeadline.IsZero() && !time.Now().Before(c.writeDeadline) {
		return 0, fmt.Errorf("restconn: write: %w", os.ErrDeadlineExceeded)
	}
	c.written = append(c.written, p...)
	return len(p), nil
}

// Read returns replies; when none are left, it first sends the commands
// written since the last replies as one request, bounded by the read
// deadline. Errors: net.ErrClosed; a timeout (os.ErrDeadlineExceeded) when
// the deadline passes before the reply; errNothingSent; a transport error.
func (c *Conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	if len(c.replies) == 0 {
		if len(c.written) == 0 {
			c.mu.Unlock()
			return 0, errNothingSent
		}
		batch := c.written
		c.written = nil
		deadline := c.readDeadline
		c.mu.Unlock()
		replies, err := c.send(batch, deadline)
		c.mu.Lock()
		if err != nil {
			c.mu.Unlock()
			return 0, err
		}
		c.replies = replies
	}
	n := copy(p, c.replies)
	c.replies = c.replies[n:]
	c.mu.Unlock()
	return n, nil
}

// send runs one exchange of batch under deadline (zero: none).
func (c *Conn) send(batch []byte, deadline time.Time) ([]byte, error) {
	cmds, err := parseCommands(batch)
	if err != nil {
		return nil, err
	}
	ctx := c.ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	replies, err := c.exchange(ctx, cmds)
	switch {
	case err == nil:
		return replies, nil
	case c.ctx.Err() != nil:
		return nil, net.ErrClosed
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("restconn: the upstash rest request passed its deadline: %w", os.ErrDeadlineExceeded)
	}
	return nil, err
}

// Close ends the connection and aborts its request in flight.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.closed = true
	c.cancel()
	return nil
}

// restAddr is the address a Conn reports: the REST endpoint's host.
type restAddr string

func (a restAddr) Network() string { return "upstash-rest" }
func (a restAddr) String() string  { return string(a) }

// LocalAddr and RemoteAddr name the REST endpoint (there is no socket of
// the connection's own).
func (c *Conn) LocalAddr() net.Addr  { return restAddr("restconn") }
func (c *Conn) RemoteAddr() net.Addr { return restAddr(c.client.Host()) }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDeadline, c.writeDeadline = t, t
	return nil
}

// SetReadDeadline bounds the next request (go-redis sets it before
// reading replies: now + ReadTimeout, or the context's deadline).
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDeadline = t
	return nil
}

// SetWriteDeadline bounds Write (which only queues).
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeDeadline = t
	return nil
}

var _ net.Conn = (*Conn)(nil)
