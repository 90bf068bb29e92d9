package configs_test

import (
	"os"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

// Production's file and the defaults both require exp.
func TestProductionRequiresExp(t *testing.T) {
	t.Parallel()
	if !configs.Default().Auth.RequireExp {
		t.Error("auth.require_exp defaults to false")
	}
	data, err := os.ReadFile("production.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Parse(data, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Auth.RequireExp {
		t.Error("production.yaml does not require exp")
	}
}

// `config check` printed `forward: []` for a route without a cookies key,
// while that route's upstream receives olp_auth as a Bearer token: the
// parsed config must hold the effective list, and an explicit empty list
// must stay empty.
func TestRouteWithoutCookiesKeyHoldsTheEffectiveForwardList(t *testing.T) {
	t.Parallel()
	cfg, err := configs.Parse([]byte(`routes:
  - {name: portal, path_prefix: /, upstream: "http://127.0.0.1:1"}
  - {name: mapas, path_prefix: /mapas, upstream: "http://127.0.0.1:2", cookies: {forward: []}}
  - {name: other, path_prefix: /x, upstream: "http://127.0.0.1:3", cookies: {domain: portal.example.org}}
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		fw := cfg.Routes[i].Cookies.Forward
		if len(fw) != 2 || fw[0] != (configs.CookieForward{Cookie: "olp_auth", As: "authorization"}) || fw[1].Cookie != "olp_mural" {
			t.Errorf("route %s: forward %+v, want the default", cfg.Routes[i].Name, fw)
		}
	}
	if fw := cfg.Routes[1].Cookies.Forward; fw == nil || len(fw) != 0 {
		t.Errorf("forward: [] became %+v", fw)
	}
	out, err := cfg.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "cookie: olp_auth"); n != 2 {
		t.Errorf("config check output names olp_auth %d times, want 2 (portal, other):\n%s", n, out)
	}
}

func TestJWKSRefreshBelowOneSecondIsRefused(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0s", "500ms", "-1s"} {
		_, err := configs.Parse([]byte("auth:\n  jwks_refresh: "+v+"\n"), noEnv)
		if err == nil || !strings.Contains(err.Error(), "auth.jwks_refresh") {
			t.Errorf("jwks_refresh %s: %v, want an error naming auth.jwks_refresh", v, err)
		}
	}
	if _, err := configs.Parse([]byte("auth:\n  leeway: -1s\n"), noEnv); err == nil || !strings.Contains(err.Error(), "auth.leeway") {
		t.Errorf("negative leeway: %v", err)
	}
}
