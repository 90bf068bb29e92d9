package configs

import (
	"strings"
	"testing"
)

func TestValidateGatewayProblems(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	tests := []struct {
		name, yaml, want string
	}{
		{"pattern origin with credentials", `
cors: {policies: {p: {allowed_origins: ["https://*.example.com"], allow_credentials: true}}}`, "cors.policies.p.allowed_origins[0]"},
		{"partial wildcard origin with credentials", `
cors: {policies: {p: {allowed_origins: ["h*"], allow_credentials: true}}}`, "cors.policies.p.allowed_origins[0]"},
		{"any origin with credentials", `
cors: {policies: {p: {allowed_origins: ["*"], allow_credentials: true}}}`, "cors.policies.p.allowed_origins[0]"},
		{"null origin with credentials", `
cors: {policies: {p: {allowed_origins: ["null"], allow_credentials: true}}}`, "cors.policies.p.allowed_origins[0]"},
		{"origin with a path", `
cors: {policies: {p: {allowed_origins: ["https://a.example.com/x"]}}}`, "cors.policies.p.allowed_origins[0]"},
		{"sandbox giving the origin back", `
routes: [{name: a, upstream: "http://127.0.0.1:1", cookies: {forward: []}, sandbox: "allow-scripts allow-same-origin"}]`, "routes[0].sandbox"},
		{"sandbox token misspelt", `
routes: [{name: a, upstream: "http://127.0.0.1:1", sandbox: "allow-script"}]`, "routes[0].sandbox"},
		{"unknown policy", `
routes: [{name: a, upstream: "http://127.0.0.1:1", cors: nope}]`, "routes[0].cors"},
		{"bad cookie domain", `
routes: [{name: a, upstream: "http://127.0.0.1:1", cookies: {domain: "a.org; Secure"}}]`, "routes[0].cookies.domain"},
		{"unreachable duplicate route", `
routes:
  - {name: a, hosts: [x.org], path_prefix: /api, upstream: "http://127.0.0.1:1"}
  - {name: b, hosts: [X.org], path_prefix: /api/, upstream: "http://127.0.0.1:2"}`, "routes[1].path_prefix"},
		{"bad wildcard host", `
routes: [{name: a, hosts: ["a.*.org"], upstream: "http://127.0.0.1:1"}]`, "routes[0].hosts[0]"},
		// A host that can never equal a request's Host (matched without
		// its port) made a route that silently never matched.
		{"host with a scheme", `
routes: [{name: a, hosts: ["https://portal.example.org"], upstream: "http://127.0.0.1:1"}]`, "routes[0].hosts[0]"},
		{"host with a port", `
routes: [{name: a, hosts: ["portal.example.org:443"], upstream: "http://127.0.0.1:1"}]`, "routes[0].hosts[0]"},
		{"host with a path", `
routes: [{name: a, hosts: ["portal.example.org/api"], upstream: "http://127.0.0.1:1"}]`, "routes[0].hosts[0]"},
		{"wildcard host with a port", `
routes: [{name: a, hosts: ["*.example.org:8080"], upstream: "http://127.0.0.1:1"}]`, "routes[0].hosts[0]"},
		{"host with a space", `
routes: [{name: a, hosts: ["portal example.org"], upstream: "http://127.0.0.1:1"}]`, "routes[0].hosts[0]"},
		{"bad trusted proxy", `
trusted_proxies: ["10.0.0.0/33"]`, "trusted_proxies[0]"},
		{"IPv4-mapped trusted proxy shorter than /96", `
trusted_proxies: ["::ffff:0:0/95"]`, "trusted_proxies[0]"},
		{"unknown escaped_slashes", `
escaped_slashes: decode`, "escaped_slashes"},
		{"route escaped_slashes unescape", `
routes: [{name: a, upstream: "http://127.0.0.1:1", escaped_slashes: unescape}]`, "routes[0].escaped_slashes"},
		{"route keep under a top-level unescape", `
escaped_slashes: unescape
routes: [{name: a, upstream: "http://127.0.0.1:1", escaped_slashes: keep}]`, "routes[0].escaped_slashes"},
		{"h2c upgrade", `
routes: [{name: a, upstream: "http://127.0.0.1:1", upgrades: [websocket, H2C]}]`, "routes[0].upgrades[1]"},
		{"upgrade with a version", `
routes: [{name: a, upstream: "http://127.0.0.1:1", upgrades: ["websocket/13"]}]`, "routes[0].upgrades[0]"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.yaml), none)
		if err == nil || !strings.Contains(err.Error(), tc.want+":") {
			t.Errorf("%s: err = %v, want a problem naming %s", tc.name, err, tc.want)
		}
	}
	ok := `
cors: {policies: {p: {allowed_origins: ["https://*.example.com", "https://a.example.com"]}}}
routes:
  - {name: a, hosts: [x.org], path_prefix: /api, upstream: "http://127.0.0.1:1", cors: p, cookies: {domain: portal.example.org}}
  - {name: b, hosts: [y.org], path_prefix: /api, upstream: "http://127.0.0.1:2", escaped_slashes: keep, upgrades: [websocket, custom]}
  - {name: c, hosts: [z.org], upstream: "http://127.0.0.1:3", escaped_slashes: reject, upgrades: []}
`
	if _, err := Parse([]byte(ok), none); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

// An IPv4-mapped CIDR in trusted_proxies never matched: peers are compared
// unmapped (10.1.2.3), the prefix was kept mapped (::ffff:10.0.0.0/104).
func TestTrustedProxiesIPv4MappedCIDRMatchesIPv4Peers(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`trusted_proxies: ["::ffff:10.0.0.0/104", "::ffff:192.0.2.7", "2001:db8::/32"]`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32"}
	if len(cfg.TrustedPrefixes) != len(want) {
		t.Fatalf("TrustedPrefixes = %v, want %v", cfg.TrustedPrefixes, want)
	}
	for i, w := range want {
		if got := cfg.TrustedPrefixes[i].String(); got != w {
			t.Errorf("TrustedPrefixes[%d] = %s, want %s", i, got, w)
		}
	}
}

func TestRouteHostsAcceptNamesAndAddresses(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"portal.example.org", "Portal.Example.ORG.", "*.example.org", "localhost", "127.0.0.1", "::1", "[::1]", "my_host.internal"} {
		if !routeHostName(strings.TrimPrefix(h, "*.")) {
			t.Errorf("routeHostName(%q) = false", h)
		}
	}
}

func TestRouteSandboxAcceptsOffOnAndTokens(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "off", "on", "allow-scripts", "allow-scripts  allow-popups allow-forms"} {
		if msg := checkSandbox(v); msg != "" {
			t.Errorf("checkSandbox(%q) = %q", v, msg)
		}
	}
}
