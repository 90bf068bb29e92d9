package e2e

import (
	"testing"
	"time"
)

// TestHostileHarnessProxiesARawRequest checks the suite's own harness: a raw
// request through the real binary reaches the recording upstream.
func TestHostileHarnessProxiesARawRequest(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	resp, body, err := rawExchange(t, p.public, "GET /hello%20x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || body != "upstream" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if got := up.requests(); len(got) != 1 || got[0].RequestURI == "" {
		t.Fatalf("upstream saw %+v", got)
	}
}
