package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// hostileOperatorToken is the ADMIN_TOKEN of these tests.
const hostileOperatorToken = "hostile-operator-token-0123456789abcdef"

// hostileAdminGet GETs path on the admin listener with the Host header set
// to host (what a browser sends when a page is opened by that name).
func hostileAdminGet(t *testing.T, p *process, host, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.admin+path, nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHostileOperatorPageByARebindingHostName: a page on evil.example whose
// name is rebound to 127.0.0.1 is, to the operator's browser, same-origin
// with the admin listener: its Origin is its own Host, so the CSRF check
// passes, and without a Host check it reads the routes and the dead letters
// (provider bodies) with no token at all. The real binary must refuse every
// /ui path addressed by a DNS name (421) and serve it by IP and localhost.
func TestHostileOperatorPageByARebindingHostName(t *testing.T) {
	p := startServe(t, minimalServe("http://127.0.0.1:1", "", ""), "ADMIN_TOKEN="+hostileOperatorToken)
	port := strings.TrimPrefix(p.admin, "http://127.0.0.1:")
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port} {
		if code, body := hostileAdminGet(t, p, host, "/ui"); code != http.StatusOK || !strings.Contains(body, "Routes") {
			t.Errorf("GET /ui with Host %s: %d, want 200 and the overview", host, code)
		}
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.nip.io:" + port, "localhost.evil.example:" + port} {
		for _, path := range []string{"/ui", "/ui/", "/ui/dead-letters", "/ui/style.css"} {
			code, body := hostileAdminGet(t, p, host, path)
			if code != http.StatusMisdirectedRequest || strings.Contains(body, "portal") || strings.Contains(body, "Routes <small>") {
				t.Errorf("GET %s with Host %s: %d, want 421 and no page content:\n%.300s", path, host, code, body)
			}
		}
	}
	// The rebinding page's replay: same-origin by its own name, the right
	// token guessed or not; refused before the token is looked at.
	form := url.Values{"id": {"ev-1"}, "operator": {"x"}, "reason": {"y"}, "token": {hostileOperatorToken}}
	req, _ := http.NewRequest(http.MethodPost, p.admin+"/ui/dead-letters/replay", strings.NewReader(form.Encode()))
	req.Host = "evil.example:" + port
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example:"+port)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("replay from a rebinding page: %d, want 421", resp.StatusCode)
	}
	eventually(t, 5*time.Second, "the refusal logged", func() bool { return strings.Contains(p.logs.String(), "DNS rebinding") })
	if strings.Contains(p.logs.String(), hostileOperatorToken) {
		t.Errorf("the operator token is in the logs")
	}
}

// TestHostileConfigCheckOfAHugeFile: a 15 MB file of 200 000 routes made
// `borda config check` run out of memory (the YAML encoder of the
// effective configuration: 20 000 routes took 10 s and 1.4 GB). Every
// command reads its file through one bound (configs.MaxFileBytes) and
// refuses a larger file by its size, quickly and without quoting it.
func TestHostileConfigCheckOfAHugeFile(t *testing.T) {
	var b strings.Builder
	b.WriteString("environment: development\nroutes:\n")
	for i := 0; b.Len() <= 300<<10; i++ {
		fmt.Fprintf(&b, "  - name: r%d\n    path_prefix: /p%d\n    upstream: http://127.0.0.1:1\n", i, i)
	}
	path := secretsWriteConfig(t, b.String())
	out, code := secretsRun(t, cleanEnv(), "config", "check", "--config", path)
	if code != 2 || !strings.Contains(out, "larger than 256 KiB") || strings.Contains(out, "r1000") {
		t.Errorf("config check of a %d-byte file: exit %d (want 2, refused by its size):\n%.500s", b.Len(), code, out)
	}
	out, code = secretsRun(t, cleanEnv(), "serve", "--config", path)
	if code == 0 || !strings.Contains(out, "larger than 256 KiB") {
		t.Errorf("serve with a %d-byte file: exit %d (want refused by its size):\n%.500s", b.Len(), code, out)
	}
}
