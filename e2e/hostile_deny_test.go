package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A deny feed answering the 256 IPv4 /8s (each within the /8 bound on one
// entry) refused every client, portal and webhooks alike (fresh attack pass
// A028), and a user-agent feed answering "*" refused every browser and
// provider (A043). Both answers are now failed fetches: the gateway keeps
// serving everyone, and says why in its log. The same lists given in the
// configuration are refused by `borda config check` and by `serve`.
func TestHostileDenyFeedsThatRefuseEveryoneAreRefused(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	var all8 strings.Builder
	for i := range 256 {
		fmt.Fprintf(&all8, "%d.0.0.0/8\n", i)
	}
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ua" {
			io.WriteString(w, "*\n")
			return
		}
		io.WriteString(w, all8.String())
	}))
	defer feed.Close()
	config := fmt.Sprintf(`environment: development
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
deny:
  feeds:
    - {url: %q, kind: ip}
    - {url: %q, kind: user_agent}
routes:
  - name: app
    path_prefix: /
    upstream: %q
`, feed.URL+"/ip", feed.URL+"/ua", up.URL)
	p := startServe(t, config)
	deadline := time.Now().Add(15 * time.Second)
	for strings.Count(p.logs.String(), "refused the answer") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the feeds' answers were not fetched and refused within 15 s:\n%s", p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range []struct{ ip, ua string }{
		{"8.8.8.8", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"},
		{"177.10.20.30", "axios/1.7.9"},
		{"2804:14c::1", "GitHub-Hookshot/1a2b3c"},
		{"100.1.2.3", ""},
	} {
		if code, body := denyStatus(t, p.public, "/x", c.ip, c.ua); code != 200 {
			t.Errorf("client %s UA %q: %d %s, want 200", c.ip, c.ua, code, body)
		}
	}

	// In the configuration: config check and serve refuse them.
	dir := t.TempDir()
	file := filepath.Join(dir, "all8.txt")
	if err := os.WriteFile(file, []byte(all8.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, deny := range map[string]string{
		"ip file":        fmt.Sprintf("deny:\n  ip_files: [%q]\n", file),
		"user agent":     "deny:\n  user_agents: [\"Mozilla\"]\n",
		"inline slash-0": "deny:\n  ips: [\"0.0.0.0/0\"]\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		cfg := "environment: development\n" + deny + "routes:\n  - name: app\n    path_prefix: /\n    upstream: \"http://127.0.0.1:3000\"\n"
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"config", "check", "--config", path}, {"serve", "--config", path, "--listen", freePort(t), "--admin-listen", freePort(t)}} {
			cmd := exec.Command(borda(t), args...)
			cmd.Env = cleanEnv()
			done := make(chan struct{})
			var out []byte
			go func() { out, _ = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("%s: borda %s still running after 30 s (it started with the list):\n%s", name, args[0], out)
			}
			if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(string(out), "deny") {
				t.Errorf("%s: borda %s exited %d, want a refusal naming deny:\n%s", name, args[0], code, out)
			}
		}
	}
}

// Fresh attack pass A71: the user-agent guard checked patterns against
// Chrome/131 samples, so "chrome/14" passed `borda config check` (and a
// feed) and then refused every Chrome 140-149 with 403. A pattern that
// matches a browser or provider user agent at any version is refused: a
// feed answering it is a failed fetch (current Chrome passes), and the
// configuration naming it fails `borda config check`; a scanner's name
// still passes.
func TestHostileDenyPatternMatchingABrowserReleaseTrainIsRefused(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "sqlmap\nchrome/14\n")
	}))
	defer feed.Close()
	config := fmt.Sprintf(`environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: ""
amqp:
  url: "amqp://guest:guest@127.0.0.1:1/"
telemetry:
  enabled: false
deny:
  feeds:
    - {url: %q, kind: user_agent}
routes:
  - name: app
    path_prefix: /
    upstream: %q
`, feed.URL+"/ua", up.URL)
	p := startServe(t, config)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(p.logs.String(), "refused the answer") {
		if time.Now().After(deadline) {
			t.Fatalf("the feed's answer was not fetched and refused within 15 s:\n%s", p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(p.logs.String(), "chrome/14") {
		t.Errorf("the log does not name the refused pattern:\n%s", p.logs.String())
	}
	for _, ua := range []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/143.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/142.0.0.0 Mobile Safari/537.36",
	} {
		if code, body := denyStatus(t, p.public, "/x", "8.8.8.8", ua); code != 200 {
			t.Errorf("UA %q: %d %s, want 200", ua, code, body)
		}
	}

	dir := t.TempDir()
	check := func(pattern string) (int, string) {
		path := filepath.Join(dir, "ua.yaml")
		cfg := fmt.Sprintf("environment: development\ndeny:\n  user_agents: [%q]\nroutes:\n  - name: app\n    path_prefix: /\n    upstream: \"http://127.0.0.1:3000\"\n", pattern)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(borda(t), "config", "check", "--config", path)
		cmd.Env = cleanEnv()
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	for _, pattern := range []string{"chrome/14", "Chrome/1", "CriOS/14", "Edg/14", "firefox/15", "rv:14", "Version/18.2", "iPhone OS 18_2", "SamsungBrowser/2", "axios/1.7", "*Chrome/14*", "Mobile/15E1",
		"Build/", "wv)", "Instagram", "FBAN", "GSA/", "Line/", "MicroMessenger", "Dalvik", "Trident"} { // fresh attack pass 3 G01
		if code, out := check(pattern); code == 0 || !strings.Contains(out, "deny") {
			t.Errorf("config check of user_agents [%q]: exit %d, want a refusal naming deny:\n%s", pattern, code, out)
		}
	}
	if code, out := check("sqlmap"); code != 0 {
		t.Errorf("config check of user_agents [sqlmap]: exit %d, want 0:\n%s", code, out)
	}
}
