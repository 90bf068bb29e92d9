package gateway

import (
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkIdleConnectionMemory opens n keep-alive connections to the
// gateway's real public listener (HTTPServer over Listener), completes one
// request on each and leaves them idle, then reports what the process
// holds per idle connection (heap in use + goroutine stacks, client side
// included: a bare net.Conn, about 0.3 KB) and the goroutines per
// connection; then closes them all and reports what stays per connection
// once the server has let them go (after-B/conn). docs/operations.md's
// sizing table is built from it.
func BenchmarkIdleConnectionMemory(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			h := newHarness(b, routes(testRoute(b, "api", "http://127.0.0.1:1")))
			s := h.srv
			s.maxConns, s.maxConnsPerIP = n+16, 0
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := s.HTTPServer("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "ok")
			}))
			go func() { _ = srv.Serve(s.Listener(ln)) }()
			defer srv.Close()
			addr := ln.Addr().String()
			var per, after, gper float64
			for b.Loop() {
				before := inUse()
				g0 := runtime.NumGoroutine()
				conns := make([]net.Conn, 0, n)
				buf := make([]byte, 512)
				for range n {
					c, err := net.DialTimeout("tcp", addr, 5*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					_ = c.SetDeadline(time.Now().Add(30 * time.Second))
					if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
						b.Fatal(err)
					}
					if _, err := c.Read(buf); err != nil { // the whole small answer
						b.Fatal(err)
					}
					conns = append(conns, c)
				}
				held := inUse()
				per = float64(held-before) / float64(n)
				gper = float64(runtime.NumGoroutine()-g0) / float64(n)
				for _, c := range conns {
					c.Close()
				}
				// Wait until the server's connection goroutines are gone.
				for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > g0+2 && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				conns = nil
				runtime.GC() // net/http's bufio pools survive one collection (sync.Pool's victim cache)
				after = float64(int64(inUse())-int64(before)) / float64(n)
			}
			b.ReportMetric(per, "B/conn")
			b.ReportMetric(gper, "goroutines/conn")
			b.ReportMetric(after, "after-B/conn")
		})
	}
}

// inUse is the heap in use plus goroutine stacks after a collection.
func inUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
