package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAnEarlyAnswerIsSentWhileTheBodyIsUnread: an upstream that answers
// (here with more than the server's 2 KB response buffer) before the
// request's body has come in is relayed at once, announcing
// Connection: close. Without that header net/http would first drain the
// unread body before sending the answer's head, waiting behind the
// transport's read of it on a client that sends the rest only later.
func TestAnEarlyAnswerIsSentWhileTheBodyIsUnread(t *testing.T) {
	t.Parallel()
	answer := strings.Repeat("x", 64<<10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // the upstream's own net/http must not drain it either
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(up.Close)
	h := newHarness(t, routes(under(testRoute(t, "early", up.URL), "/early")))
	conn, err := net.DialTimeout("tcp", h.front.Listener.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// The client sends the rest of its body only once it has the answer.
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(conn, "POST /early/upload HTTP/1.1\r\nHost: portal.example.org\r\nContent-Length: 1000000\r\n\r\nabc"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the body is unread: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil || len(body) != len(answer) {
		t.Fatalf("answer body: %d bytes (%v), want %d", len(body), err, len(answer))
	}
	if res.StatusCode != http.StatusOK || !res.Close {
		t.Errorf("answer %d, Connection: close %v; want 200 closing the connection", res.StatusCode, res.Close)
	}
}
