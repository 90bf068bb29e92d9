package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
)

// TestOperatorPageRelaxesARuleInABrowserAndRefusesClearly runs the real
// `borda serve` (Redis behind an outage proxy, PostgreSQL migrated,
// ADMIN_TOKEN) and drives chromium through the relax form beside the burst
// rule (issue 24 item 13): the page answers with the limit in force, the
// factor and the end, the gateway enforces that limit (RateLimit-Policy),
// and limit_relaxes records who and why. Then each refusal, in the
// browser and over plain HTTP: a wrong token (403), a bad factor (400
// with the reason), the store down (503, recorded failed), a cross-origin
// POST (403); none reads as a relax.
func TestOperatorPageRelaxesARuleInABrowserAndRefusesClearly(t *testing.T) {
	ctx := browser(t)
	redisURL := servicetest.RedisURL(t)
	pool, dbURL := servicetest.IsolatedDatabase(t)
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := servicetest.NewOutageProxy(t, opt.Addr)
	prefix := servicetest.KeyPrefix(t)
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Del(context.Background(), prefix+"cfg:relax:burst"); rdb.Close() })

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(upstream.Close)
	config := `environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: "redis://` + proxy.Addr() + `/` + strconv.Itoa(opt.DB) + `"
  key_prefix: "` + prefix + `"
routes:
  - name: portal
    path_prefix: /
    upstream: "` + upstream.URL + `"
    rate_limits: [burst]
    expose_headers: true
rate_limits:
  timeout: 1s   # a loaded CI machine must not fail the header check open
  rules:
    - name: burst
      scope: ip
      limit: 4
      window: 1m
      mode: enforce
`
	env := []string{"DATABASE_URL=" + dbURL, "ADMIN_TOKEN=" + operatorToken}
	cfgPath := filepath.Join(t.TempDir(), "migrate.yaml")
	if err := os.WriteFile(cfgPath, []byte(strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(config)), 0o600); err != nil {
		t.Fatal(err)
	}
	migrate := exec.Command(borda(t), "migrate", "--config", cfgPath)
	migrate.Env = append(cleanEnv(), env...)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("borda migrate: %v\n%s", err, out)
	}
	srv := startServe(t, config, env...)

	// submit fills the burst rule's relax form on a fresh overview and
	// returns the text of what the answer shows: the confirmation, or the
	// problem with its heading.
	submit := func(factor, dur, token string) string {
		t.Helper()
		const form = `#relax-portal-burst `
		do(t, ctx, "opening the relax form",
			chromedp.Navigate(srv.admin+"/ui"),
			chromedp.Click(chromedp.CSS(form+`summary`)),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="factor"]`), factor),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="for"]`), dur),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="operator"]`), "ana.plantao"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="reason"]`), "matrícula: fila no portal"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="token"]`), token),
			chromedp.Click(chromedp.CSS(form+`button`)),
			chromedp.WaitVisible(chromedp.CSS(`#relaxed, #problem`)),
		)
		return textOf(t, ctx, chromedp.CSS("main"))
	}

	// A wrong token and a bad factor: refused, said, nothing relaxed.
	if text := submit("3", "10m", "not-the-token"); !strings.Contains(text, "403 · Forbidden") || !strings.Contains(text, "the operator token is not ADMIN_TOKEN") ||
		strings.Contains(text, "Relaxed") {
		t.Errorf("a wrong token reads:\n%s", text)
	}
	if text := submit("0.5", "soon", operatorToken); !strings.Contains(text, "400 · Bad Request") ||
		!strings.Contains(text, "Factor: must be between 1 and 100") || !strings.Contains(text, `For: "soon" is not a duration`) || strings.Contains(text, "Relaxed") {
		t.Errorf("a bad factor reads:\n%s", text)
	}
	screenshot(t, ctx, "operator-relax-refused.png")

	// The relax: the page says the limit in force, the gateway enforces it.
	text := submit("3", "10m", operatorToken)
	for _, want := range []string{"Relaxed burst: 12 / 1m00s per ip in force (×3 of 4) until ", "Recorded in limit_relaxes as #", "every gateway applies it within 5s"} {
		if !strings.Contains(text, want) {
			t.Errorf("after the relax the page lacks %q:\n%s", want, text)
		}
	}
	if routes := textOf(t, ctx, chromedp.ID("routes")); !strings.Contains(routes, "12 / 1m00s per ip relaxed ×3 until") || !strings.Contains(routes, "(base 4,") {
		t.Errorf("Routes table after the relax:\n%s", routes)
	}
	screenshot(t, ctx, "operator-relaxed.png")
	resp, err := http.Get(srv.public + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("RateLimit-Policy"); got != `"burst";q=12;w=60` {
		t.Errorf("RateLimit-Policy right after the relax = %q, want the relaxed limit 12", got)
	}
	var operator, reason, origin, outcome string
	if err := pool.QueryRow(t.Context(), `SELECT operator, reason, origin, outcome FROM limit_relaxes WHERE outcome = 'applied'`).
		Scan(&operator, &reason, &origin, &outcome); err != nil {
		t.Fatalf("reading the applied limit_relaxes row: %v", err)
	}
	if operator != "ana.plantao" || reason != "matrícula: fila no portal" || origin != "page" {
		t.Errorf("limit_relaxes row: %q %q %s %s", operator, reason, origin, outcome)
	}

	// Plain HTTP: the same guards without a browser.
	post := func(form url.Values, origin string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.admin+"/ui/relax", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultTransport.RoundTrip(req) // no redirect followed
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	good := url.Values{"rule": {"burst"}, "factor": {"2"}, "for": {"5m"}, "operator": {"curl"}, "reason": {"http test"}, "token": {operatorToken}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for key, vs := range good {
			f[key] = vs
		}
		f.Set(k, v)
		return f
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		origin string
		status int
		want   string
	}{
		{"missing token", with("token", ""), "", 403, "the operator token is not ADMIN_TOKEN"},
		{"cross-origin", good, "http://evil.example", 403, "not sent from this page"},
		{"bad factor", with("factor", "1e9"), "", 400, "Factor: must be between 1 and 100"},
		{"bad duration", with("for", "48h"), "", 400, "For: must be positive and at most 24h"},
		{"no reason", with("reason", " "), "", 400, "Reason: required"},
	} {
		status, body := post(tc.form, tc.origin)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d, want %d with %q:\n%s", tc.name, status, tc.status, tc.want, body)
		}
	}

	// The store down: 503 in the browser, recorded failed, the relax in
	// force unchanged (×3, not ×5).
	proxy.SetDown(true)
	text = submit("5", "10m", operatorToken)
	proxy.SetDown(false)
	if !strings.Contains(text, "503 · Service Unavailable") || !strings.Contains(text, "The relax was not applied, so no relax is in force") ||
		!strings.Contains(text, "the rate-limit store did not take it") || strings.Contains(text, "Relaxed") {
		t.Errorf("with the store down the page reads:\n%s", text)
	}
	var failed int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM limit_relaxes WHERE outcome = 'failed' AND factor = 5 AND error <> ''`).Scan(&failed); err != nil || failed != 1 {
		t.Errorf("failed rows for ×5: %d (%v), want 1", failed, err)
	}
	if v := rdb.Get(t.Context(), prefix+"cfg:relax:burst").Val(); v != "3" {
		t.Errorf("relax key after the failed ×5 = %q, want 3", v)
	}
}
