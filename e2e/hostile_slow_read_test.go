package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHostileSlowReadersHoldUpstreamConnections (attack pass A83): a
// client that requests a large response and never reads it held the
// gateway→upstream connection (and a thread-per-request upstream's
// worker) for ever: responses had no send timeout. Through the real
// binary with server.send_timeout: 1s, five such clients: the upstream's
// writes fail (its connection is released) for every one, while a client
// that reads gets the whole body.
func TestHostileSlowReadersHoldUpstreamConnections(t *testing.T) {
	const size = 50 << 20
	released := make(chan struct{}, 16)
	chunk := []byte(strings.Repeat("x", 64<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "52428800")
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				released <- struct{}{}
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	p := startServe(t, minimalServe(srv.URL, "", "server:\n  send_timeout: 1s\n"))
	const slow = 5
	for range slow {
		c, err := net.DialTimeout("tcp", hostPort(p.public), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		// Never read.
	}
	deadline := time.After(60 * time.Second)
	for i := range slow {
		select {
		case <-released:
		case <-deadline:
			t.Fatalf("%d of %d slow readers' upstream connections released; the rest are held", i, slow)
		}
	}
	// A client that reads is not cut, whatever the body's length.
	resp, err := http.Get(p.public + "/big")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != size {
		t.Errorf("a reading client got %d of %d bytes (%v)", n, size, err)
	}
}
