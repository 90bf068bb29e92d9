package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/olp-edu/borda/internal/servicetest"
)

// operatorToken is the ADMIN_TOKEN of the operator page tests.
const operatorToken = "e2e-operator-token-0123456789abcdef"

// chromiumPath finds Debian's chromium, or skips (fails under
// BORDA_REQUIRE_SERVICES=1: .ci/run installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if servicetest.Required() {
			t.Fatalf("chromium is not installed and BORDA_REQUIRE_SERVICES=1 (apt-get install chromium; .ci/run does)")
		}
		t.Skip("chromium is not installed (apt-get install chromium); skipping the browser test (set BORDA_REQUIRE_SERVICES=1 to fail instead)")
	}
	return path
}

// browser starts a headless chromium with the flags this closed network
// needs and a fresh profile, and returns a chromedp context on it.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first call starts the browser, which lives as long as ctx: no
	// timeout on it (each step below has its own).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// browserStep bounds one browser step.
const browserStep = 30 * time.Second

// do runs browser steps within browserStep.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// textOf returns the text of what sel selects, within browserStep.
func textOf[S chromedp.Selectable](t *testing.T, ctx context.Context, sel S) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	text, err := chromedp.Run(sctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("reading the text of %v: %v", sel, err)
	}
	return text
}

// screenshot saves a full-page PNG as BORDA_SCREENSHOT_DIR/name when that
// variable is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("BORDA_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, browserStep)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", filepath.Join(dir, name))
}

// TestOperatorPageShowsTheDeadLetterAndReplaysItInABrowser runs the real
// `borda serve` and `borda forward` against a legacy endpoint that
// refuses one event (422: a dead letter) and fails another (503: the
// breaker opens), then drives Debian's chromium through the operator
// page: the routes, limiter, pipeline and forwarder it shows, the dead
// letter with its reason and the legacy reply, and a replay through the
// form, checked in webhook_replays and in the forward queue.
func TestOperatorPageShowsTheDeadLetterAndReplaysItInABrowser(t *testing.T) {
	ctx := browser(t)
	redisURL := servicetest.RedisURL(t)
	amqpURL := servicetest.AMQPURL(t)
	_, dbURL := servicetest.IsolatedDatabase(t)
	name := servicetest.Name(t)

	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"maintenance"`) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "legacy em manutencao, volte logo")
			return
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"error":"campo instance ausente <b>x</b>"}`)
	}))
	t.Cleanup(legacy.Close)

	exchange, rk := name+".events", name+".connect.whatsapp.legacy_forward"
	fwdQ, dlq, evQ := name+"-fwd", name+"-dlq", name+"-events"
	config := `environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: "` + redisURL + `"
  key_prefix: "` + servicetest.KeyPrefix(t) + `"
amqp:
  url: "` + amqpURL + `"
telemetry:
  enabled: true
webhook:
  path: /webhooks/whatsapp
  exchange: "` + exchange + `"
  routing_key: "` + rk + `"
forward:
  queue: "` + fwdQ + `"
  dlq: "` + dlq + `"
  events_queue: "` + evQ + `"
  url: "` + legacy.URL + `/legacy"
  retry_delays: ["1s"]
  timeout: 2s
  breaker:
    failures: 2
    open_for: 10m
routes:
  - name: portal
    path_prefix: /
    upstream: "http://127.0.0.1:1"
    rate_limits: [burst]
rate_limits:
  rules:
    - name: burst
      scope: ip
      limit: 50
      window: 5s
      mode: enforce
    - name: api
      scope: ip
      algorithm: gcra
      limit: 600
      window: 1m
      mode: observe
      routes: ["*"]
`
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	servicetest.DeleteAtCleanup(t, conn, []string{fwdQ, fwdQ + "-retry-1s", dlq, evQ}, []string{exchange})
	env := []string{"DATABASE_URL=" + dbURL, "WEBHOOK_TOKENS=e2e-webhook-token", "ADMIN_TOKEN=" + operatorToken,
		"LEGACY_WEBHOOK_HMAC_SECRET=e2e-hmac-secret"}

	// The forwarder: the same file, its own admin port.
	fwdCfg := filepath.Join(t.TempDir(), "forward.yaml")
	if err := os.WriteFile(fwdCfg, []byte(strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(config)), 0o600); err != nil {
		t.Fatal(err)
	}
	migrate := exec.Command(borda(t), "migrate", "--config", fwdCfg)
	migrate.Env = append(cleanEnv(), env...)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("borda migrate: %v\n%s", err, out)
	}
	fwd := startForward(t, fwdCfg, env...)
	fwd.waitReady(t)

	srv := startServe(t, config, env...)
	eventually(t, 30*time.Second, "the webhook ingress ready", func() bool {
		resp, err := http.Get(srv.public + "/readyz/webhook")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	depth := func(q string) int {
		t.Helper()
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("inspecting %s: %v", q, err)
		}
		return st.Messages
	}
	post := func(body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.public+"/webhooks/whatsapp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer e2e-webhook-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("webhook POST = %d %s", resp.StatusCode, b)
		}
	}
	// Refused for good (422): a dead letter at once. Then failing (503)
	// twice: the breaker opens, and the retries run out.
	post(`{"event":"messages.upsert","instance":"escola-1","apikey":"SEKRET-APIKEY-1","data":{"key":{"id":"MSG-1"}}}`)
	eventually(t, 30*time.Second, "the refused event in the DLQ", func() bool { return depth(dlq) == 1 })
	post(`{"event":"connection.update","instance":"maintenance","data":{"state":"open"}}`)
	eventually(t, 30*time.Second, "the failing event in the DLQ", func() bool { return depth(dlq) == 2 })

	var text string
	body := func(url string) string {
		t.Helper()
		do(t, ctx, "loading "+url, chromedp.Navigate(url))
		text = textOf(t, ctx, chromedp.CSS("main"))
		return text
	}
	// The forwarder writes its snapshot every 5 s: wait (without the
	// browser) until the page has the open breaker, then load it.
	eventually(t, 30*time.Second, "the overview showing the open forwarder breaker", func() bool {
		resp, err := http.Get(srv.admin + "/ui")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "opened by: <code>5xx (HTTP 503)")
	})
	// A few proxied requests, so the limiter section has decisions to show
	// (the upstream is closed: 502, but each request is decided first).
	for range 5 {
		if resp, err := http.Get(srv.public + "/api/alunos"); err == nil {
			resp.Body.Close()
		}
	}
	body(srv.admin + "/")
	for _, want := range []string{"portal", "burst", "enforce", "50 / 5s per ip", "burst\t5\t0", "observe", "api", "redis", fwdQ, fwdQ + "-retry-1s", dlq,
		"open", "legacy em manutencao, volte logo", "Broker", "connected"} {
		if !strings.Contains(text, want) {
			t.Errorf("overview lacks %q:\n%s", want, text)
		}
	}
	screenshot(t, ctx, "operator-page.png")

	// Stop the forwarder so the replayed event stays in the forward queue.
	fwd.stop()

	page := body(srv.admin + "/ui/dead-letters")
	for _, want := range []string{"rejected by the legacy endpoint", "HTTP 422", `{"error":"campo instance ausente <b>x</b>"}`,
		`"apikey":"[redacted]"`, "MSG-1", "retries exhausted", "HTTP 503"} {
		if !strings.Contains(page, want) {
			t.Errorf("dead-letter page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "SEKRET-APIKEY-1") {
		t.Errorf("the body preview shows the apikey:\n%s", page)
	}
	screenshot(t, ctx, "operator-dead-letters.png")

	// Replay the refused one (its article holds the 422) through its form.
	const refused = `//article[contains(., "HTTP 422")]`
	eventID := textOf(t, ctx, refused+`//code[contains(@class,"event-id")]`)
	do(t, ctx, "replaying through the form",
		chromedp.SendKeys(refused+`//input[@name="operator"]`, "ana.plantao"),
		chromedp.SendKeys(refused+`//input[@name="reason"]`, "legacy fixed the instance field"),
		chromedp.SendKeys(refused+`//input[@name="token"]`, operatorToken),
		chromedp.Click(refused+`//button`),
		chromedp.WaitVisible(chromedp.ID("replayed")),
	)
	text = textOf(t, ctx, chromedp.ID("replayed"))
	if eventID == "" || !strings.Contains(text, eventID) || !strings.Contains(text, "webhook_replays as #") {
		t.Errorf("after the replay the page says %q (event %q)", text, eventID)
	}

	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var operator, reason, outcome string
	if err := pool.QueryRow(context.Background(), `SELECT operator, reason, outcome FROM webhook_replays WHERE event_id = $1`, eventID).
		Scan(&operator, &reason, &outcome); err != nil {
		t.Fatalf("reading the webhook_replays row of %q: %v", eventID, err)
	}
	if operator != "ana.plantao" || reason != "legacy fixed the instance field" || outcome != "republished" {
		t.Errorf("webhook_replays row: operator %q reason %q outcome %q", operator, reason, outcome)
	}
	eventually(t, 15*time.Second, "the replayed event in the forward queue, the other still dead-lettered", func() bool {
		return depth(fwdQ) == 1 && depth(dlq) == 1
	})
}

// eventually polls cond every 200 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
