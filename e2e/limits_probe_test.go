package e2e

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// probeRules are a per-IP, a per-user and an observe rule with short
// windows, so a probe of all three ends in seconds.
const probeRules = `rate_limits:
  rules:
    - name: burst
      scope: ip
      limit: 4
      window: 2s
      mode: enforce
    - name: peruser
      scope: user
      limit: 6
      window: 8s
      mode: enforce
      message: "Você fez muitas requisições. Tente novamente em {retry_after} segundos."
    - name: watch
      scope: ip
      limit: 2
      window: 10s
      mode: observe
`

// probeRun runs `borda limits probe` with the gateway's config against
// target and returns its exit code and output.
func probeRun(t *testing.T, config, target string) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "probe.yaml")
	cfg := strings.NewReplacer("{LISTEN}", "127.0.0.1:1", "{ADMIN}", "127.0.0.1:2").Replace(config)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(borda(t), "limits", "probe", "--config", path, "--target", target)
	cmd.Env = append(cleanEnv(), "AUTH_JWT_SECRET="+identitySecret)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// The staging step of the rollout: the probe passes against a real
// gateway (every rule limited, each 429 checked, the limit lifted after
// Retry-After, the observe rule's marker seen), and fails, naming the
// check, against one whose 429 lacks a header.
func TestLimitsProbePassesAgainstAGatewayAndNamesAMissingHeader(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	config := minimalServe(up.URL, "    rate_limits: [burst, peruser, watch]\n", probeRules)
	p := startServe(t, config, "AUTH_JWT_SECRET="+identitySecret)

	code, out := probeRun(t, config, p.public)
	t.Logf("probe report:\n%s", out)
	if code != 0 {
		t.Fatalf("probe of a conforming gateway exited %d:\n%s", code, out)
	}
	for _, want := range []string{"burst (ip): ok", "peruser (user): ok", "watch (ip): ok", "lifts after Retry-After"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}

	// The same gateway behind a proxy that drops RateLimit-Policy.
	u, _ := url.Parse(p.public)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		r.Header.Del("RateLimit-Policy")
		return nil
	}
	broken := httptest.NewServer(rp)
	defer broken.Close()
	code, out = probeRun(t, config, broken.URL)
	if code != 1 || !strings.Contains(out, "FAIL  RateLimit-Policy") {
		t.Fatalf("probe of a gateway without RateLimit-Policy exited %d (want 1 naming the check):\n%s", code, out)
	}
}

// A probe exhausts real limits: a production config is refused.
func TestLimitsProbeRefusesAProductionConfig(t *testing.T) {
	config := strings.Replace(minimalServe("http://127.0.0.1:1", "    rate_limits: [burst]\n", probeRules), "environment: development", "environment: production", 1)
	code, out := probeRun(t, config, "http://127.0.0.1:1")
	t.Logf("%s", out)
	if code != 2 || !strings.Contains(out, "production") {
		t.Fatalf("exit %d, want 2 refusing production:\n%s", code, out)
	}
}

// Fresh attack pass 22 E7: a target that only redirects was reported as
// "the rule does not apply", with no word of the redirect; the probe
// follows none, and now says so with the host it pointed to (never the
// Location's query).
func TestLimitsProbeOfARedirectingTargetNamesTheRedirect(t *testing.T) {
	config := minimalServe("http://127.0.0.1:1", "    rate_limits: [burst]\n", probeRules)
	var reached atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer target.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/login?token=CANARYLOCATION", http.StatusFound)
	}))
	defer redirecting.Close()
	code, out := probeRun(t, config, redirecting.URL)
	host := strings.TrimPrefix(target.URL, "http://")
	if code != 1 || !strings.Contains(out, "a redirect to "+host) || strings.Contains(out, "CANARY") {
		t.Fatalf("exit %d, want 1 naming the redirect to %s without its query:\n%s", code, host, out)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the probe followed the redirect %d times", n)
	}
}
