package servicetest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SlowDialProxy forwards 127.0.0.1 connections to target, each new one
// only after delay (the TCP and TLS handshakes of a remote store: the
// first bytes wait), bytes on an open connection at once. It returns its
// address and the count of connections it accepted; it closes at cleanup.
func SlowDialProxy(t testing.TB, target string, delay time.Duration) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Go(func() {
				defer c.Close()
				time.Sleep(delay)
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.Close() }()
				_, _ = io.Copy(c, u)
			})
		}
	}()
	return ln.Addr().String(), &accepted
}
