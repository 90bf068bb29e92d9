package servicetest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// OutageProxy is a TCP proxy on 127.0.0.1 in front of a real server whose
// outage a test switches on and off: while down it closes every open
// connection and every new one at once (a client sees a reset or EOF, as
// when the server is gone). Addr is what the client dials.
type OutageProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewOutageProxy listens on a free loopback port and forwards to target
// (host:port) until the test ends. It starts up.
func NewOutageProxy(t testing.TB, target string) *OutageProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("outage proxy: %v", err)
	}
	p := &OutageProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.SetDown(true)
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *OutageProxy) Addr() string { return p.ln.Addr().String() }

// SetDown starts (true) or ends (false) the outage.
func (p *OutageProxy) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *OutageProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *OutageProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *OutageProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *OutageProxy) serve(c net.Conn) {
	defer p.untrack(c)
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(s) {
		s.Close()
		return
	}
	defer p.untrack(s)
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
}
