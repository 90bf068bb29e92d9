package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// servedHarness serves h's public handler through the gateway's own
// http.Server on loopback; it returns the server and its base URL.
func servedHarness(t *testing.T, h *harness) (*http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := h.srv.HTTPServer("", h.srv.Handler())
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return hs, "http://" + ln.Addr().String()
}

const drainCutLine = "HTTP drain did not finish in time"

// TestShutdownKeepsServingThroughTheReadinessGrace: during
// shutdown.readiness_grace readiness answers 503 while requests on new
// connections are still served (the load balancer is still sending some);
// the grace ends with the call's context.
func TestShutdownKeepsServingThroughTheReadinessGrace(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	hs, base := servedHarness(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- h.srv.Shutdown(ctx, time.Minute, hs) }()
	if !eventually(t, 5*time.Second, h.srv.draining.Load) {
		t.Fatal("Shutdown did not start draining")
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readiness during the grace: %d, want 503", res.StatusCode)
	}
	res, err = client.Get(base + "/x")
	if err != nil {
		t.Fatalf("a request on a new connection during the grace: %v, want it served", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("a request during the grace: %d, want 200", res.StatusCode)
	}
	cancel()
	select {
	case <-shut:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after its context ended")
	}
}

// TestShutdownWithNothingInFlightIsClean: a drain that finishes in time
// returns nil at once and says "HTTP drained", never that it cut anything.
func TestShutdownWithNothingInFlightIsClean(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Options{})
	hs, base := servedHarness(t, h)
	res, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx, 0, hs); err != nil {
		t.Fatalf("Shutdown = %v, want nil", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Shutdown returned only when its context ended, with nothing in flight")
	}
	logs := h.logs.String()
	if strings.Contains(logs, drainCutLine) || !strings.Contains(logs, "HTTP drained") {
		t.Fatalf("logs:\n%s\nwant \"HTTP drained\" and no cut", logs)
	}
}
