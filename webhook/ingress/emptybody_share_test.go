package ingress

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

	"github.com/prometheus/client_golang/prometheus"
)

// TestAnEmptySignedBodyFitsASpentShare: a signed source's body reserves
// nothing before it is read (its Content-Length is unauthenticated), so
// an empty body of a client holding exactly its share of the body budget
// is still read and judged (400 INVALID_PAYLOAD), not refused 429 for a
// byte it never sends.
func TestAnEmptySignedBodyFitsASpentShare(t *testing.T) {
	const part = 4096
	cfg := defaultOptions()
	cfg.MaxBodyBytes = 2 * part
	cfg.UnauthenticatedBodyBytes = 8 * part // the share: 2 × part
	cfg.Sources = []Source{{Name: "x", Path: "/webhooks/x", Signature: &Signature{Scheme: "github", Tolerance: time.Minute, Secrets: []string{"s"}}}}
	i, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	i.SetClientIP(func(r *http.Request) string { return r.Header.Get("X-Test-Client") })
	srv := httptest.NewServer(i)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	head := func(n int, sig string) string {
		return fmt.Sprintf("POST /webhooks/x HTTP/1.1\r\nHost: x\r\nX-Test-Client: client\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n", sig, n)
	}
	// The client holds its share to the last byte in two stalled bodies.
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, head(part+1, "00")+strings.Repeat("a", part))
	}
	deadline := time.Now().Add(5 * time.Second)
	for i.budget.used.Load() < 2*part && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := i.budget.used.Load(); got != 2*part {
		t.Fatalf("budget used %d, want %d", got, 2*part)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, head(0, hexHMAC("s", "")))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to the empty body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), StatusInvalidPayload) {
		t.Fatalf("an empty signed body with the share spent: %d %s, want 400 %s", resp.StatusCode, body, StatusInvalidPayload)
	}
}
