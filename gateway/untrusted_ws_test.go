package gateway

import (
	"net/http"
	"testing"

	"github.com/olp-edu/borda/cookies"
)

// TestUntrustedRouteWebSocketKeepsItsHandshake: the response policy of a
// route that forwards no session removes every Sec- header (fresh attack
// pass 12, A06), but not the WebSocket handshake's own (RFC 6455 §11.3:
// Sec-WebSocket-Accept, -Protocol, -Extensions), without which the
// browser refuses every WebSocket of a third-party widget; a browser
// feature's Sec- header on the 101 is still removed.
func TestUntrustedRouteWebSocketKeepsItsHandshake(t *testing.T) {
	t.Parallel()
	echo := wsEcho(t)
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Sec-WebSocket-Protocol", "chat")
		w.Header().Set("Sec-Session-Registration", `(ES256);path="/dbsc/start";challenge="c"`)
		echo(w, r)
	})
	third := under(testRoute(t, "third", up.URL), "/third")
	third.Cookies.Forward = []cookies.Forward{}
	h := newHarness(t, routes(third))
	res, conn, br := rawRequest(t, h.front.Listener.Addr().String(), "GET /third/ws HTTP/1.1\r\n"+
		"Host: portal.example.org\r\nOrigin: https://widget.example\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Protocol: chat\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	defer conn.Close()
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status = %d, want 101", res.StatusCode)
	}
	if got := res.Header.Get("Sec-WebSocket-Accept"); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Errorf("Sec-WebSocket-Accept = %q, want RFC 6455's sample answer", got)
	}
	if got := res.Header.Get("Sec-WebSocket-Protocol"); got != "chat" {
		t.Errorf("Sec-WebSocket-Protocol = %q, want chat", got)
	}
	if got := res.Header.Get("Sec-Session-Registration"); got != "" {
		t.Errorf("Sec-Session-Registration %q reached the browser on the 101", got)
	}
	if err := writeFrame(conn, []byte("olá"), true); err != nil {
		t.Fatal(err)
	}
	if got, err := readFrame(br); err != nil || string(got) != "olá" {
		t.Errorf("echo = %q, %v", got, err)
	}
}
