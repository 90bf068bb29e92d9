package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// CORS at the edge (docs/edge.md, "CORS") through the full public handler.

// corsOptions is route api to up and route down (/down, nothing listening)
// under one credentialed policy for https://app.example.com.
func corsOptions(t *testing.T, up string) Options {
	portal := &CORSPolicy{
		AllowedOrigins:   []string{"https://app.example.com"},
		AllowedMethods:   []string{"GET", "POST", "PUT"},
		AllowedHeaders:   []string{"Authorization", "Content-Type"},
		ExposedHeaders:   []string{"X-RateLimit-Remaining", "X-Request-Id"},
		AllowCredentials: true,
		MaxAge:           10 * time.Minute,
	}
	api, down := testRoute(t, "api", up), testRoute(t, "down", "http://127.0.0.1:1")
	down.PathPrefix = "/down"
	api.CORS, down.CORS = portal, portal
	return routes(api, down)
}

// TestForeignOriginGetsNoCORSHeaders: an origin the policy does not list
// gets no Access-Control-* header; a listed one gets its origin, the
// credentials flag and the exposed headers. (That configs refuses
// a wildcard origin with credentials is configs' TestValidateGatewayProblems.)
func TestForeignOriginGetsNoCORSHeaders(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, corsOptions(t, up.URL))
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
	h := newHarness(t, corsOptions(t, up.URL))
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
	h := newHarness(t, corsOptions(t, up.URL))
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
