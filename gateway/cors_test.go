package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

// CORS at the edge (docs/edge.md, "CORS") through the full public handler.

const corsConfig = `
cors:
  policies:
    portal:
      allowed_origins: ["https://app.example.com"]
      allowed_methods: [GET, POST, PUT]
      allowed_headers: [Authorization, Content-Type]
      allow_credentials: true
      max_age: 10m
routes:
  - name: api
    upstream: "{up}"
    cors: portal
    rate_limits: [burst]
  - name: down
    path_prefix: /down
    upstream: "http://127.0.0.1:1"
    cors: portal
rate_limits:
  rules:
    - {name: burst, scope: ip, limit: 100, window: 1m}
`

func TestWildcardOriginWithCredentialsIsRefused(t *testing.T) {
	t.Parallel()
	for _, origin := range []string{"https://*.example.com", "h*", "*", "null"} {
		_, err := configs.Parse([]byte(`
cors:
  policies:
    p: {allowed_origins: ["`+origin+`"], allow_credentials: true}
`), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), "cors.policies.p.allowed_origins[0]") {
			t.Errorf("origin %q with credentials: err = %v, want a problem naming the field", origin, err)
		}
	}
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, parseConfig(t, corsConfig, nil, map[string]string{"up": up.URL}))
	req := h.newRequest(t, http.MethodGet, "", "/api/me")
	req.Header.Set("Origin", "https://evil.example.net")
	res := h.do(t, req)
	for k := range res.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("foreign origin got %s: %q", k, res.Header.Get(k))
		}
	}
	req = h.newRequest(t, http.MethodGet, "", "/api/me")
	req.Header.Set("Origin", "https://app.example.com")
	res = h.do(t, req)
	if res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || res.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("allowed origin: ACAO %q ACAC %q", res.Header.Get("Access-Control-Allow-Origin"), res.Header.Get("Access-Control-Allow-Credentials"))
	}
	if exp := res.Header.Get("Access-Control-Expose-Headers"); !strings.Contains(exp, "X-Request-Id") || !strings.Contains(exp, "Ratelimit-Remaining") && !strings.Contains(exp, "X-Ratelimit-Remaining") {
		t.Errorf("Access-Control-Expose-Headers = %q, want the rate-limit headers and X-Request-Id", exp)
	}
}

func TestVaryOriginOnEveryCORSResponse(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Encoding")
		w.Header().Set("Access-Control-Allow-Origin", "*") // the edge owns CORS
		switch r.URL.Path {
		case "/missing":
			http.NotFound(w, r)
		case "/boom":
			w.WriteHeader(http.StatusInternalServerError)
		case "/vary-origin":
			w.Header().Set("Vary", "origin, Accept-Encoding")
		}
	})
	h := newHarness(t, parseConfig(t, corsConfig, nil, map[string]string{"up": up.URL}))
	blocked := false
	h.limiter.decide = func(ratelimitSubject) ratelimitVerdict {
		if blocked {
			return blockVerdict()
		}
		return ratelimitVerdict{}
	}
	check := func(name, path, origin string, wantStatus int, wantVary string) {
		t.Helper()
		req := h.newRequest(t, http.MethodGet, "", path)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res := h.do(t, req)
		if res.StatusCode != wantStatus {
			t.Errorf("%s: status %d, want %d", name, res.StatusCode, wantStatus)
		}
		if got := strings.Join(res.Header.Values("Vary"), ", "); got != wantVary {
			t.Errorf("%s: Vary = %q, want %q", name, got, wantVary)
		}
		if acao := res.Header.Values("Access-Control-Allow-Origin"); len(acao) > 1 || (origin == "" && len(acao) > 0) {
			t.Errorf("%s: Access-Control-Allow-Origin = %q", name, acao)
		}
	}
	check("no origin", "/api/items", "", 200, "Origin, Accept-Encoding")
	check("with origin", "/api/items", "https://app.example.com", 200, "Origin, Accept-Encoding")
	check("upstream says origin", "/vary-origin", "", 200, "Origin, Accept-Encoding")
	check("upstream 404", "/missing", "", 404, "Origin, Accept-Encoding")
	check("upstream 500", "/boom", "https://app.example.com", 500, "Origin, Accept-Encoding")
	check("gateway 502", "/down/x", "https://app.example.com", 502, "Origin")
	blocked = true
	check("429", "/api/items", "https://app.example.com", 429, "Origin")
}

func TestPreflightAnsweredAtEdge(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, parseConfig(t, corsConfig, nil, map[string]string{"up": up.URL}))
	preflight := func(origin string) *http.Response {
		req := h.newRequest(t, http.MethodOptions, "", "/v2/pet")
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "PUT")
		req.Header.Set("Access-Control-Request-Headers", "content-type")
		return h.do(t, req)
	}
	res := preflight("https://test.example.org")
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != "" || res.Header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("disallowed preflight: %d ACAO %q ACAM %q", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"), res.Header.Get("Access-Control-Allow-Methods"))
	}
	res = preflight("https://app.example.com")
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		res.Header.Get("Access-Control-Allow-Methods") != "PUT" || res.Header.Get("Access-Control-Max-Age") != "600" {
		t.Errorf("allowed preflight: %d %v", res.StatusCode, res.Header)
	}
	if !strings.Contains(res.Header.Get("Vary"), "Origin") {
		t.Errorf("preflight Vary = %q", res.Header.Get("Vary"))
	}
	if n := up.calls(); n != 0 {
		t.Errorf("preflights reached the upstream %d times", n)
	}
	if n := h.limiter.calls(); n != 0 {
		t.Errorf("preflights spent rate-limit budget %d times", n)
	}
	// (b) An OPTIONS without Access-Control-Request-Method is no preflight.
	req := h.newRequest(t, http.MethodOptions, "", "/v2/pet")
	req.Header.Set("Origin", "https://app.example.com")
	res = h.do(t, req)
	if res.StatusCode != http.StatusOK || up.calls() != 1 {
		t.Errorf("plain OPTIONS: status %d, upstream calls %d; want it proxied", res.StatusCode, up.calls())
	}
}
