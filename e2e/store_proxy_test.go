package e2e

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The store's faults, between the gateways and the local Redis: a store
// far away (startDelayProxy), a store path that loses answers
// (startLossyProxy) and one that holds requests up (startLateProxy).

// startProxy listens on 127.0.0.1 and forwards each connection to target:
// what the client sends goes at once; what target answers goes through
// back(client, upstream), which returns when the connection is done. It
// returns its address; the listener and every connection close at the
// end of the test.
func startProxy(t *testing.T, target string, back func(client, upstream net.Conn)) string {
	t.Helper()
	return startProxyBoth(t, target, func(up, c net.Conn) { io.Copy(up, c) }, back)
}

// startProxyBoth is startProxy with what the client sends going through
// fwd(upstream, client), which returns when the client is done.
func startProxyBoth(t *testing.T, target string, fwd, back func(a, b net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			track(c)
			track(up)
			wg.Go(func() { fwd(up, c); up.Close() })
			wg.Go(func() { back(c, up); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// startDelayProxy is a startProxy that delivers what target answers
// *delay (ns, read per chunk) after it arrived (a store that far away;
// requests go at once, and pipelined answers keep their order and
// spacing).
func startDelayProxy(t *testing.T, target string, delay *atomic.Int64) string {
	t.Helper()
	return startProxy(t, target, func(c, up net.Conn) { copyDelayed(c, up, delay) })
}

// copyDelayed copies src to dst, each chunk *delay (ns) after it was read.
func copyDelayed(dst io.Writer, src io.Reader, delay *atomic.Int64) {
	type chunk struct {
		due time.Time
		b   []byte
	}
	chunks := make(chan chunk, 4096)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				chunks <- chunk{time.Now().Add(time.Duration(delay.Load())), b[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.due)) // the store's distance, not a wait before an assertion
		if _, err := dst.Write(c.b); err != nil {
			for range chunks { // let the reader end
			}
			return
		}
	}
}

// startLossyProxy is a startProxy that loses *perMille in a thousand of
// the answers target sends back: it closes both connections instead of
// passing the answer on (the request reached target and ran). It returns
// its address and the count of answers lost.
func startLossyProxy(t *testing.T, target string, perMille *atomic.Int64) (string, *atomic.Int64) {
	t.Helper()
	var lost atomic.Int64
	addr := startProxy(t, target, func(c, up net.Conn) {
		defer up.Close()
		b := make([]byte, 32<<10)
		for {
			n, err := up.Read(b)
			if n > 0 {
				if rand.Int64N(1000) < perMille.Load() {
					lost.Add(1)
					return // the answer is lost with the connection
				}
				if _, werr := c.Write(b[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	return addr, &lost
}

// startLateProxy is a startProxy that holds *perMille in a thousand of
// the requests it forwards (and what follows them on their connection)
// for late before passing them on: the client gives up on them, then the
// store runs them (a request held up on the network). It returns its
// address and the count of requests held.
func startLateProxy(t *testing.T, target string, perMille *atomic.Int64, late time.Duration) (string, *atomic.Int64) {
	t.Helper()
	var held atomic.Int64
	addr := startProxyBoth(t, target, func(up, c net.Conn) {
		b := make([]byte, 32<<10)
		for {
			n, err := c.Read(b)
			if n > 0 {
				if rand.Int64N(1000) < perMille.Load() {
					held.Add(1)
					time.Sleep(late) // the network's delay, not a wait before an assertion
				}
				if _, werr := up.Write(b[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}, func(c, up net.Conn) { io.Copy(c, up) })
	return addr, &held
}
