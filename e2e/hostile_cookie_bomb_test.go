package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHostileThirdPartyRouteCookieBombsThePortal (attack pass A81): a
// sandboxed third-party route (cookies.forward: []) answered 40 × 4 KB
// year-long Set-Cookie lines with Path=/ plus a fixed csrftoken: the
// browser stored them for the portal's origin and every portal request
// became too large to serve. Through the real binary: every Set-Cookie of
// that route reaches the client confined to Path=/third with no Domain,
// so the portal's paths never receive them; the portal route's own
// cookies are untouched. The bomb stays under the 64 KiB response-head
// bound (A050, TestHostileUpstreamHugeResponseHeadIsRefused): 14 × 4 KB
// lines, as many as fit, so the confinement itself is what is tested.
func TestHostileThirdPartyRouteCookieBombsThePortal(t *testing.T) {
	bomb := func(w http.ResponseWriter, r *http.Request) {
		for i := range 14 {
			w.Header().Add("Set-Cookie", fmt.Sprintf("bomb%d=%s; Path=/; Max-Age=31536000", i, strings.Repeat("A", 4000)))
		}
		w.Header().Add("Set-Cookie", "csrftoken=FIXATED; path=/; Domain=127.0.0.1; Max-Age=31536000")
		w.Header().Add("Set-Cookie", "lang=pt; PATH=/x")
	}
	third := httptest.NewServer(http.HandlerFunc(bomb))
	t.Cleanup(third.Close)
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "csrftoken=portal; Path=/")
	}))
	t.Cleanup(portal.Close)
	p := startServe(t, minimalServe(portal.URL, "", `  - name: third
    path_prefix: /third
    upstream: "`+third.URL+`"
    cookies: {forward: []}
`))
	resp, _, err := rawExchange(t, p.public, "GET /third/bomb HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	lines := resp.Header.Values("Set-Cookie")
	if len(lines) != 16 {
		t.Fatalf("%d Set-Cookie lines, want the 16 sent (confined, not dropped)", len(lines))
	}
	for _, l := range lines {
		attrs := strings.ToLower(l)
		if !strings.HasSuffix(l, "; Path=/third") || strings.Count(attrs, "path=") != 1 || strings.Contains(attrs, "domain=") {
			t.Errorf("Set-Cookie %.60q... is not confined to Path=/third", l)
		}
	}
	resp, _, err = rawExchange(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Values("Set-Cookie"); len(got) != 1 || got[0] != "csrftoken=portal; Path=/" {
		t.Errorf("the portal route's own Set-Cookie became %q", got)
	}
}
