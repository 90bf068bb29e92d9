package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/olp-edu/borda/cookies"
)

// A Bearer token over cookies.MaxTokenBytes is answered 431 with the PT-BR
// problem and never reaches the upstream, with or without auth
// configured: the limiter could not have read it.
func TestBearerOverTheTokenBoundIsRefusedBeforeTheUpstream(t *testing.T) {
	t.Parallel()
	for name, env := range map[string]map[string]string{"with auth": {"AUTH_JWT_SECRET": testSecret}, "without auth": {}} {
		up := newRecordingUpstream(t, nil)
		cfg := parseConfig(t, `
routes:
  - name: api
    upstream: "{up}"
`, env, map[string]string{"up": up.URL})
		h := newHarness(t, cfg)
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("a", cookies.MaxTokenBytes+1))
		rr := h.serve(req, "198.51.100.1:1")
		if rr.Code != http.StatusRequestHeaderFieldsTooLarge || rr.Header().Get("Content-Language") != "pt-BR" {
			t.Errorf("%s: %d %q, want 431 in PT-BR", name, rr.Code, rr.Body.String())
		}
		if up.calls() != 0 {
			t.Errorf("%s: upstream called %d times", name, up.calls())
		}
		req = h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("a", cookies.MaxTokenBytes))
		if rr := h.serve(req, "198.51.100.1:1"); rr.Code != http.StatusOK || up.calls() != 1 {
			t.Errorf("%s: token of exactly the bound: %d, upstream calls %d", name, rr.Code, up.calls())
		}
	}
}
