package gateway

import (
	"net"
	"sync"
)

// Listener wraps the public listener ln so that at most
// server.max_connections client connections are open at once, idle
// keep-alive and upgraded (WebSocket) connections included, and counts
// them in borda_http_connections_open. At the cap Accept waits for a
// connection to close, so new clients queue in the kernel's accept
// backlog instead of costing a goroutine and buffers each (as
// golang.org/x/net/netutil.LimitListener does; nginx's worker_connections
// is the peer). Closing the returned listener ends a waiting Accept.
// Serve the admin listener unwrapped: /metrics and probes must answer at
// the cap.
func (s *Server) Listener(ln net.Listener) net.Listener {
	n := s.maxConns
	if n <= 0 {
		n = 4096
	}
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{}), s: s}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	s         *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	l.s.metrics.conns.Inc()
	return &limitConn{Conn: c, l: l}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	l         *limitListener
	closeOnce sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.l.s.metrics.conns.Dec()
		<-c.l.sem
	})
	return err
}

// CloseWrite half-closes the connection, for net/http's lingering close
// after an answer that left a request body unread (the client then reads
// the answer before the connection resets).
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
