package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A real Chromium on the portal's origin: the portal's route sets the
// session (olp_auth, hardened), then the user opens a page of a
// third-party route (`forward: []`) whose response sends
// `Clear-Site-Data: "cookies"`, a comma-joined `Set-Cookie: x=1,
// olp_auth=evil` and a script that would act as the portal. The page must
// run no script (CSP sandbox), the user must still be logged in, and the
// portal's upstream must get the real session and no evil olp_auth.
func TestUntrustedRouteCannotLogTheUserOutOrSetTheSessionInChromium(t *testing.T) {
	ctx := browser(t)
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/set" {
			w.Header().Add("Set-Cookie", "olp_auth=good.session.token; Path=/")
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<body>auth="+r.Header.Get("Authorization")+" cookie="+r.Header.Get("Cookie")+"</body>")
	}))
	t.Cleanup(portal.Close)
	third := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "x=1, olp_auth=evil; Path=/")
		w.Header().Add("Set-Cookie", "OLP_AUTH=evil; Path=/")
		w.Header().Set("Clear-Site-Data", `"cookies"`)
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<body>static<script>document.body.textContent = "ran"</script></body>`)
	}))
	t.Cleanup(third.Close)
	p := startServe(t, minimalServe(portal.URL, "", `  - name: mapas
    path_prefix: /mapas
    upstream: "`+third.URL+`"
    cookies: {forward: []}
`))
	// localhost is a secure context to Chromium: Secure cookies and
	// Clear-Site-Data work over plain HTTP there.
	base := strings.Replace(p.public, "127.0.0.1", "localhost", 1)
	do(t, ctx, "setting the session", chromedp.Navigate(base+"/set"))
	do(t, ctx, "loading the portal", chromedp.Navigate(base+"/echo"))
	if text := textOf(t, ctx, chromedp.CSS("body")); !strings.Contains(text, "auth=Bearer good.session.token") {
		t.Fatalf("the session was not set: %q", text)
	}
	do(t, ctx, "loading the third party's page", chromedp.Navigate(base+"/mapas/page"))
	if text := textOf(t, ctx, chromedp.CSS("body")); text != "static" {
		t.Errorf("the third party's page ran its script: %q", text)
	}
	do(t, ctx, "loading the portal again", chromedp.Navigate(base+"/echo"))
	text := textOf(t, ctx, chromedp.CSS("body"))
	if !strings.Contains(text, "auth=Bearer good.session.token") {
		t.Errorf("the third party logged the user out: the portal got %q", text)
	}
	if strings.Contains(text, "evil") {
		t.Errorf("the third party's olp_auth reached the portal: %q", text)
	}
}
