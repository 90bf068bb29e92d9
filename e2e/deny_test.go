package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// denyConfig is a gateway behind a trusted proxy (127.0.0.1, X-Real-IP
// names the client) with top-level deny lists (an inline IPv6 prefix, a
// user-agent glob, a feed), an allow list, and a route list read from a
// file.
func denyConfig(upstream, feedURL, routeFile string) string {
	return fmt.Sprintf(`environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
trusted_proxies: ["127.0.0.1/32"]
client_ip_header: X-Real-IP
redis:
  url: ""
amqp:
  url: "amqp://guest:guest@127.0.0.1:1/"
telemetry:
  enabled: false
webhook:
  path: /webhooks/whatsapp
deny:
  ips: ["2001:db8:bad::/48", "203.0.113.0/24"]
  user_agents: ["sqlmap", "evil-scanner/*"]
  allow_ips: ["203.0.113.50"]
  feeds:
    - url: %q
      kind: ip
routes:
  - name: app
    path_prefix: /
    upstream: %q
    deny:
      ip_files: [%q]
`, feedURL, upstream, routeFile)
}

func denyStatus(t *testing.T, base, path, clientIP, ua string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("X-Real-IP", clientIP)
	if ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Deny lists refuse listed clients with 403 problem+json in PT-BR before
// any other work, for IPv4, IPv6 (also in its IPv4-mapped spelling) and
// user agents; a route's file is re-read on SIGHUP; a feed applies once
// fetched; the allow list exempts an address from the top-level lists;
// webhooks are subject to them.
func TestDenyListsRefuseBeforeAnyWork(t *testing.T) {
	var upstreamHits int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { upstreamHits++ }))
	defer up.Close()
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "# feed\n198.51.100.0/24\n")
	}))
	defer feed.Close()
	routeFile := filepath.Join(t.TempDir(), "route-deny.txt")
	if err := os.WriteFile(routeFile, []byte("192.0.2.1 # one address\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, denyConfig(up.URL, feed.URL, routeFile), "WEBHOOK_TOKENS=e2e-deny-token")

	for _, tc := range []struct {
		ip, ua string
		want   int
	}{
		{"203.0.113.9", "", 403},               // inline IPv4 prefix
		{"::ffff:203.0.113.9", "", 403},        // its IPv4-mapped spelling
		{"2001:db8:bad:1::7", "", 403},         // inline IPv6 prefix
		{"2001:db8:bad::1", "", 403},           // another of its addresses
		{"2001:db8:600d::1", "", 200},          // outside it
		{"192.0.2.1", "", 403},                 // the route's file
		{"192.0.2.2", "", 200},                 // not in it
		{"192.0.2.3", "SQLMap/1.7", 403},       // user agent, any case
		{"192.0.2.3", "evil-scanner/2.0", 403}, // a glob
		{"192.0.2.3", "Mozilla/5.0", 200},
		{"203.0.113.50", "", 200}, // the allow list exempts it from the top-level lists
	} {
		code, body := denyStatus(t, p.public, "/x", tc.ip, tc.ua)
		if code != tc.want {
			t.Errorf("client %s UA %q: %d, want %d: %s", tc.ip, tc.ua, code, tc.want, body)
		}
		if code == 403 && !strings.Contains(body, "Acesso negado") {
			t.Errorf("client %s: 403 without the PT-BR problem: %s", tc.ip, body)
		}
	}
	if upstreamHits != 4 {
		t.Errorf("upstream saw %d requests, want the 4 allowed ones", upstreamHits)
	}

	// The feed applies once its first fetch lands (Start fetches at once).
	deadline := time.Now().Add(10 * time.Second)
	for code, _ := denyStatus(t, p.public, "/x", "198.51.100.4", ""); code != 403; code, _ = denyStatus(t, p.public, "/x", "198.51.100.4", "") {
		if time.Now().After(deadline) {
			t.Fatalf("an address of the feed is still %d after 10 s", code)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Webhooks too: a denied address gets 403 before authentication.
	if code, body := denyStatus(t, p.public, "/webhooks/whatsapp", "203.0.113.9", ""); code != 403 {
		t.Errorf("webhook from a denied address: %d %s", code, body)
	}
	if code, body := denyStatus(t, p.public, "/webhooks/whatsapp", "203.0.113.50", ""); code == 403 || !strings.Contains(body, "status") {
		t.Errorf("webhook from the allowed provider address: %d %s, want the ingress's own answer", code, body)
	}

	// SIGHUP re-reads the route's file.
	if err := os.WriteFile(routeFile, []byte("192.0.2.2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		a, _ := denyStatus(t, p.public, "/x", "192.0.2.2", "")
		b, _ := denyStatus(t, p.public, "/x", "192.0.2.1", "")
		if a == 403 && b == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGHUP: new entry %d (want 403), removed entry %d (want 200)", a, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp := get(t, p.admin+"/metrics", "")
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`borda_denied_total{list="deny",route="unrouted"}`, `borda_denied_total{list="route:app",route="app"}`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
