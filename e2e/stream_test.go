package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// streamingUpstream serves an endless Server-Sent Events stream at /events
// (one event every 200 ms) and a raw protocol upgrade at /ws that echoes
// every byte back, as a WebSocket echo server does after its handshake.
func streamingUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(buf, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		buf.Flush()
		_, _ = io.Copy(conn, buf) // echo until the client closes
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// An SSE stream and a WebSocket-style upgrade pass through the whole
// middleware chain of the real binary (access log, metrics, identity): the first
// event arrives at once, not when the stream ends, and bytes flow both
// ways after the 101 (edge cases 6 and 7).
func TestStreamsAndUpgradesThroughServe(t *testing.T) {
	up := streamingUpstream(t)
	n := newNames(t)
	cfg := strings.Replace(n.config(up.URL, up.URL, "amqp://guest:guest@"+freePort(t)+"/", ""),
		"  key_prefix: \""+n.prefix+"\"\n", "", 1)
	p := startServe(t, cfg)

	t.Run("SSE flushes each event at once", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, p.public+"/events", nil)
		req.Host = "alpha.localhost"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(resp.Body).ReadString('\n')
			got <- line
		}()
		select {
		case line := <-got:
			if line != "data: 0\n" {
				t.Errorf("first line %q", line)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("no event within 3 s: the stream is buffered")
		}
	})

	t.Run("upgrade echoes both ways", func(t *testing.T) {
		c, err := net.Dial("tcp", strings.TrimPrefix(p.public, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: alpha.localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d, want 101", resp.StatusCode)
		}
		fmt.Fprint(c, "ping-through-borda")
		buf := make([]byte, len("ping-through-borda"))
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping-through-borda" {
			t.Errorf("echo %q, %v", buf, err)
		}
	})
}
