package e2e

import (
	"strings"
	"testing"
	"time"
)

// A careless operator adds a third-party route without a cookies key: it
// receives the portal session by default (olp_auth as Authorization).
// The real binary says so at `config check` and at `serve` start, naming
// the route and its upstream (fresh attack pass 6 K01: it said nothing).
func TestHostileThirdPartyRouteWithoutCookiesKeyIsWarned(t *testing.T) {
	yaml := "environment: development\nlisten: \"{LISTEN}\"\nadmin_listen: \"{ADMIN}\"\nroutes:\n" +
		"  - {name: portal, upstream: \"http://127.0.0.1:1\", cookies: {forward: [{cookie: olp_auth, as: authorization}]}}\n" +
		"  - {name: analytics, path_prefix: /analytics, upstream: \"http://127.0.0.2:1\"}\n"
	path := secretsWriteConfig(t, strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(yaml))
	out, code := secretsRun(t, cleanEnv(), "config", "check", "--config", path)
	if code != 0 {
		t.Fatalf("config check: exit %d (a warning must not fail the file):\n%s", code, out)
	}
	want := `routes[1].cookies: absent, so route "analytics" hands the portal session to 127.0.0.2:1`
	if !strings.Contains(out, "borda: warning: ") || !strings.Contains(out, want) {
		t.Errorf("config check does not warn about the analytics route:\n%s", out)
	}
	if strings.Contains(out, `route "portal" hands`) {
		t.Errorf("config check warns about the route whose cookies are written:\n%s", out)
	}
	p := startServe(t, yaml)
	// The child's stderr reaches the buffer through os/exec's copying
	// goroutine, possibly after /healthz answered: wait for the line.
	eventually(t, 10*time.Second, "borda serve's start-up warning", func() bool { return strings.Contains(p.logs.String(), want) })
}
