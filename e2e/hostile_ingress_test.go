package e2e

// Attacks on the webhook ingress's authentication and event ids
// (docs/webhooks.md §2 and §4), against the real `borda serve` (and
// `borda forward`) with a private RabbitMQ topology.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

const ingressToken = "e2e-ingress-token"

// ingressHostileConfig is a serve/forward config with only the webhook
// ingress (id_fields [id]) on n's private topology; the forwarder retries
// once after 1 s.
func ingressHostileConfig(n names, amqpURL, redisURL string) string {
	return fmt.Sprintf(`environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: %q
  key_prefix: %q
amqp:
  url: %q
telemetry:
  enabled: false
webhook:
  path: /webhooks/whatsapp
  exchange: %q
  routing_key: %q
  id_fields: [id]
forward:
  queue: %q
  events_queue: %q
  dlq: %q
  retry_delays: [1s]
`, redisURL, n.prefix, amqpURL, n.exchange, n.routingKey, n.queue, n.events, n.dlq)
}

// startIngressServe starts serve on n's topology and waits for the
// webhook to be ready.
func startIngressServe(t *testing.T, n names, amqpURL, redisURL string) *process {
	t.Helper()
	t.Cleanup(func() { n.deleteTopology(t, amqpURL) })
	p := startServe(t, ingressHostileConfig(n, amqpURL, redisURL), "WEBHOOK_TOKENS="+ingressToken)
	waitReady(t, p.public+"/readyz/webhook")
	return p
}

// ingressRaw posts body to path with the given header lines on a raw
// connection (so repeated and odd fields reach the server as written).
func ingressRaw(t *testing.T, base, path, body string, lines ...string) (int, http.Header, string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: gw.localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", path, len(body))
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("\r\n" + body)
	resp, reply, err := rawExchange(t, base, b.String(), 10*time.Second)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, reply
}

// The old ingress read the first Authorization line and the first
// ?token=, so a second, different credential slipped by (and the same one
// twice was taken). Every form given twice is a 401 now, in any letter
// case of the field name, and nothing is published.
func TestHostileIngressCredentialGivenTwiceIsRefused(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	p := startIngressServe(t, newNames(t), amqpURL, redisURL)
	good, bad := "Bearer "+ingressToken, "Bearer wrong-token"
	cases := []struct {
		name, path string
		lines      []string
	}{
		{"Authorization right then wrong", "/webhooks/whatsapp", []string{"Authorization: " + good, "Authorization: " + bad}},
		{"authorization lower-case, then upper-case", "/webhooks/whatsapp", []string{"authorization: " + good, "AUTHORIZATION: " + bad}},
		{"Authorization twice, same value", "/webhooks/whatsapp", []string{"Authorization: " + good, "authorization: " + good}},
		{"Authorization Bearer then Basic", "/webhooks/whatsapp", []string{"Authorization: " + good, "Authorization: Basic dXNlcjpwYXNz"}},
		{"X-Webhook-Token twice, same value", "/webhooks/whatsapp", []string{"X-Webhook-Token: " + ingressToken, "x-webhook-token: " + ingressToken}},
		{"apikey twice, same value", "/webhooks/whatsapp", []string{"apikey: " + ingressToken, "APIKEY: " + ingressToken}},
		{"?token= right then wrong", "/webhooks/whatsapp?token=" + ingressToken + "&token=wrong", nil},
		{"?token= twice, same value", "/webhooks/whatsapp?token=" + ingressToken + "&token=" + ingressToken, nil},
		{"?token= then percent-encoded key", "/webhooks/whatsapp?token=" + ingressToken + "&%74oken=wrong", nil},
		{"path token twice", "/webhooks/whatsapp/t/" + ingressToken + "/t/wrong", nil},
	}
	for k, c := range cases {
		body := fmt.Sprintf(`{"id":"dup-cred-%d"}`, k)
		code, _, reply := ingressRaw(t, p.public, c.path, body, c.lines...)
		if code != 401 || !strings.Contains(reply, `"UNAUTHORIZED"`) {
			t.Errorf("%s: %d %s, want 401 UNAUTHORIZED", c.name, code, reply)
		}
	}
	// Control: one credential is accepted.
	if code, _, reply := ingressRaw(t, p.public, "/webhooks/whatsapp", `{"id":"dup-cred-ok"}`, "Authorization: "+good); code != 200 {
		t.Fatalf("single bearer: %d %s, want 200", code, reply)
	}
}

// 1 000 wrong tokens from one IP used to get 1 000 × 401 and never a 429.
// Past webhook.auth_failures.per_ip (20 per minute) they get 429
// AUTH_THROTTLED with Retry-After and a PT-BR message, counted in the
// metrics; the right token from the same IP is still accepted.
func TestHostileIngressWrongTokenFloodIsThrottled(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	p := startIngressServe(t, newNames(t), amqpURL, redisURL)
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(token string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, p.public+"/webhooks/whatsapp", strings.NewReader(`{"id":"flood"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	codes := map[int]int{}
	var first429 *http.Response
	var body429 string
	for k := range 1000 {
		resp, body := post(fmt.Sprintf("wrong-%d", k))
		codes[resp.StatusCode]++
		if resp.StatusCode == 429 && first429 == nil {
			first429, body429 = resp, body
		}
	}
	if codes[401] != 20 || codes[429] != 980 {
		t.Fatalf("answers %v, want 20 × 401 then 980 × 429", codes)
	}
	if ra := first429.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("429 Retry-After %q, want whole seconds", ra)
	}
	if !strings.Contains(body429, `"status":"AUTH_THROTTLED"`) || !strings.Contains(body429, "Muitas falhas de autenticação") {
		t.Errorf("429 body %s, want AUTH_THROTTLED with a PT-BR message", body429)
	}
	if resp, body := post(ingressToken); resp.StatusCode != 200 || !strings.Contains(body, "PUBLISHED_CONFIRMED") {
		t.Errorf("valid token from the throttled IP: %d %s, want 200 PUBLISHED_CONFIRMED", resp.StatusCode, body)
	}
	resp, err := http.Get(p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`borda_webhook_auth_failures_total{reason="mismatch"} 1000`, `borda_webhook_auth_throttled_total{scope="ip"} 980`} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// One warning for the episode, not 980 log lines.
	if n := strings.Count(p.logs.String(), "webhook authentication failures throttled"); n != 1 {
		t.Errorf("%d throttle warnings logged, want 1", n)
	}
}

// startIngressForward runs `borda forward` with config, delivering to
// legacy; it is stopped with SIGTERM (by PID) at the end of the test.
func startIngressForward(t *testing.T, config, legacy string) *syncBuffer {
	t.Helper()
	bin := borda(t)
	path := filepath.Join(t.TempDir(), "forward.yaml")
	config = strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(config)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "forward", "--config", path, "--admin", freePort(t))
	cmd.Env = append(cleanEnv(), "LEGACY_WEBHOOK_URL="+legacy, "LEGACY_WEBHOOK_HMAC_SECRET=e2e-hmac-secret")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("borda forward logs:\n%s", logs.String())
		}
	})
	return logs
}

// Event ids with CR/LF, NUL, ESC, C1 controls, DEL, invalid UTF-8, lone
// surrogates or over 200 bytes used to become the Idempotency-Key as they
// were: the forwarder's POST failed ("invalid header field value") until
// the event was dead-lettered, and two different invalid ids were folded
// into one (the second event answered ALREADY_PROCESSED and lost). Now
// each is published under "sha256:<hex>", a retry of the same bytes still
// dedups, and `borda forward` delivers every one with a valid header.
func TestHostileIngressHostileEventIDsAreForwarded(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	n := newNames(t)
	p := startIngressServe(t, n, amqpURL, redisURL)
	legacy := recordingUpstream(t)
	stamp := time.Now().UnixNano() // ids unique to this run: the forwarder's Redis keys outlive it
	bodyIDs := []string{
		`"crlf-%d\r\nX-Injected: 1"`,
		`"nul-%d\u0000"`,
		`"esc-%d\u001b[2J\u001b]0;pwned\u0007"`,
		`"c1-%d\u009b31m"`,
		`"del-%d\u007f"`,
		`"long-%d-` + strings.Repeat("k", 220) + `"`,
	}
	for _, id := range bodyIDs {
		body := `{"id":` + fmt.Sprintf(id, stamp) + `}`
		for try, want := range []string{"PUBLISHED_CONFIRMED", "ALREADY_PROCESSED"} {
			code, _, reply := ingressRaw(t, p.public, "/webhooks/whatsapp", body, "Authorization: Bearer "+ingressToken)
			if code != 200 || !strings.Contains(reply, want) {
				t.Errorf("id %q, delivery %d: %d %s, want 200 %s", id, try+1, code, reply, want)
			}
		}
	}
	// Raw invalid UTF-8 in a JSON body is refused 400 INVALID_UTF8 (attack
	// B18): the provider is told, nothing is acknowledged and lost; so is
	// an escaped lone surrogate, which no downstream parser reads alike
	// (fresh attack pass A036).
	for _, id := range []string{"\"badutf8-%d\xff\"", "\"badutf8-%d\xfe\"", `"surrogate-%d\ud800"`, `"surrogate-%d\udc01x"`} {
		body := `{"id":` + fmt.Sprintf(id, stamp) + `}`
		if code, _, reply := ingressRaw(t, p.public, "/webhooks/whatsapp", body, "Authorization: Bearer "+ingressToken); code != 400 || !strings.Contains(reply, "INVALID_UTF8") {
			t.Errorf("id %q: %d %s, want 400 INVALID_UTF8", id, code, reply)
		}
	}
	// A delivery-id header with bytes >= 0x80 (net/http accepts obs-text).
	hdrID := fmt.Sprintf("Webhook-Id: hdr-%d-\xff\xfe", stamp)
	if code, _, reply := ingressRaw(t, p.public, "/webhooks/whatsapp", `{"id":"ignored"}`, "Authorization: Bearer "+ingressToken, hdrID); code != 200 {
		t.Errorf("Webhook-Id with obs-text: %d %s, want 200", code, reply)
	}
	want := len(bodyIDs) + 1

	startIngressForward(t, ingressHostileConfig(n, amqpURL, redisURL), legacy.URL+"/legacy")
	deadline := time.Now().Add(30 * time.Second)
	for len(legacy.requests()) < want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	seen := legacy.requests()
	if len(seen) != want {
		t.Fatalf("legacy endpoint got %d POSTs within 30 s, want %d", len(seen), want)
	}
	// The derived id, bound to the body (a token source, docs/webhooks.md §4).
	derived := regexp.MustCompile(`^sha256:[0-9a-f]{64}~[0-9a-f]{16}$`)
	keys := map[string]bool{}
	for _, r := range seen {
		k := r.Header.Get("Idempotency-Key")
		if !derived.MatchString(k) {
			t.Errorf("Idempotency-Key %q, want sha256:<64 hex>~<16 hex>", k)
		}
		keys[k] = true
	}
	if len(keys) != want {
		t.Errorf("%d distinct Idempotency-Keys, want %d", len(keys), want)
	}
}

// An attacker rotating X-Forwarded-For from a peer that is not a trusted
// proxy is still one client: the throttle keys on the gateway's resolved
// client IP (docs/edge.md, "Client IP"), so the 21st failure is a 429. Behind a
// trusted proxy the forwarded addresses are distinct clients.
func TestHostileIngressForgedForwardedForDoesNotEscapeTheThrottle(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	flood := func(base string) map[int]int {
		codes := map[int]int{}
		for k := range 25 {
			code, _, _ := ingressRaw(t, base, "/webhooks/whatsapp", `{"id":"xff"}`,
				"Authorization: Bearer wrong", fmt.Sprintf("X-Forwarded-For: 203.0.113.%d", k+1))
			codes[code]++
		}
		return codes
	}
	p := startIngressServe(t, newNames(t), amqpURL, redisURL)
	if codes := flood(p.public); codes[401] != 20 || codes[429] != 5 {
		t.Errorf("untrusted peer with forged X-Forwarded-For: %v, want 20 × 401 then 5 × 429", codes)
	}
	n := newNames(t)
	t.Cleanup(func() { n.deleteTopology(t, amqpURL) })
	trusted := startServe(t, "trusted_proxies: [127.0.0.1/32]\n"+ingressHostileConfig(n, amqpURL, redisURL), "WEBHOOK_TOKENS="+ingressToken)
	waitReady(t, trusted.public+"/readyz/webhook")
	if codes := flood(trusted.public); codes[401] != 25 {
		t.Errorf("25 clients behind a trusted proxy: %v, want 25 × 401", codes)
	}
}

// Issue 22 item 6: a token in a path spelling the router accepts but the
// redaction missed ("/webhooks/whatsapp;x/t/TOKEN", "/.t/TOKEN",
// "/t./TOKEN", "/T;x/TOKEN", "/Webhooks/WhatsApp/t/TOKEN" routed
// elsewhere) reached the access log. The real binary's log holds none of
// them, and the ";x" spelling the router sends to the ingress is served.
func TestHostileIngressTokenPathSpellingsNeverReachTheLog(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	p := startIngressServe(t, newNames(t), amqpURL, redisURL)
	const leak = "Leaked-Tok-9f3a"
	paths := []string{
		"/webhooks/whatsapp;x/t/" + leak,
		"/webhooks/whatsapp/.t/" + leak,
		"/webhooks/whatsapp/t./" + leak,
		"/webhooks/whatsapp/T;x/" + leak + "/messages-upsert",
		"/webhooks/whatsapp/%74/" + leak,
		"/webhooks/whatsapp/t/" + leak + "/" + leak,
		"/webhooks/whatsapp/messages-upsert;token=" + leak,
		"/Webhooks/WhatsApp/t/" + leak,
		"/webhooks/whatsapp;x/t/" + ingressToken + "/messages-upsert",
	}
	for k, path := range paths {
		code, _, reply := ingressRaw(t, p.public, path, fmt.Sprintf(`{"id":"spelling-%d"}`, k))
		t.Logf("POST %s → %d %s", path, code, reply)
		if strings.Contains(path, ingressToken) && code != 200 {
			t.Errorf("POST %s: %d %s, want 200 (the router sends it to the ingress)", path, code, reply)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(strings.ToLower(p.logs.String()), `"path":"/webhooks/`) < len(paths) {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d access-log lines within 10 s:\n%s", len(paths), p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	logs := p.logs.String()
	for _, secret := range []string{leak, "Tok-9f3a", ingressToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
}

// TestHostileConfiguredTokenInAnyPathSegmentNeverReachesTheLog (attack
// A74): the real binary, the live token in segments no "/t/" marker
// introduces, behind a prefix and on the portal's route: no access-log
// line holds it.
func TestHostileConfiguredTokenInAnyPathSegmentNeverReachesTheLog(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	p := startIngressServe(t, newNames(t), amqpURL, redisURL)
	paths := []string{
		"/webhooks/whatsapp/" + ingressToken,
		"/webhooks/whatsapp/token/" + ingressToken,
		"/webhooks/whatsapp/tt/" + ingressToken,
		"/x/webhooks/whatsapp/t/" + ingressToken,
		"/gw/webhooks/whatsapp/" + ingressToken + "/messages-upsert",
		"/" + ingressToken + ";x",
		// Past the 64 segments compared (fresh attack pass A060).
		"/api" + strings.Repeat("/a", 62) + "/" + ingressToken,
		"/api" + strings.Repeat("/a", 64) + "/" + ingressToken,
		"/api" + strings.Repeat("/a", 200) + "/" + ingressToken + "/b",
	}
	for k, path := range paths {
		code, _, reply := ingressRaw(t, p.public, path, fmt.Sprintf(`{"id":"segment-%d"}`, k))
		t.Logf("POST %s → %d %s", path, code, reply)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(p.logs.String(), `"path":"/`) < len(paths) {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d access-log lines within 10 s:\n%s", len(paths), p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if logs := p.logs.String(); strings.Contains(logs, ingressToken) {
		t.Errorf("the log holds the token:\n%s", logs)
	}
}

// TestHostileWebhookNumberOutOfRangeIsRefused (fresh attack pass 3, W12):
// {"a":1e999999} was acknowledged 200 PUBLISHED_CONFIRMED although
// PostgreSQL's jsonb ("value overflows numeric format") and encoding/json
// refuse it and PHP/Python read infinity. Through the real binary, a
// number beyond float64 or PostgreSQL's numeric, at the top level or
// inside an Evolution event, is refused 400 NUMBER_OUT_OF_RANGE like a
// lone surrogate; an in-range neighbour (1e308, 1e-400) is published.
func TestHostileWebhookNumberOutOfRangeIsRefused(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	n := newNames(t)
	p := startIngressServe(t, n, amqpURL, redisURL)
	stamp := time.Now().UnixNano()
	for _, num := range []string{"1e999999", "-1e400", "1e-16384"} {
		for _, body := range []string{
			fmt.Sprintf(`{"id":"num-%d","a":%s}`, stamp, num),
			fmt.Sprintf(`{"event":"messages.upsert","instance":"escola-1","data":{"key":{"id":"num-%d"},"n":[%s]}}`, stamp, num),
		} {
			if code, _, reply := ingressRaw(t, p.public, "/webhooks/whatsapp", body, "Authorization: Bearer "+ingressToken); code != 400 || !strings.Contains(reply, "NUMBER_OUT_OF_RANGE") {
				t.Errorf("%s: %d %s, want 400 NUMBER_OUT_OF_RANGE", body, code, reply)
			}
		}
	}
	for i, num := range []string{"1e308", "1e-400"} {
		body := fmt.Sprintf(`{"id":"num-ok-%d-%d","a":%s}`, stamp, i, num)
		if code, _, reply := ingressRaw(t, p.public, "/webhooks/whatsapp", body, "Authorization: Bearer "+ingressToken); code != 200 || !strings.Contains(reply, "PUBLISHED_CONFIRMED") {
			t.Errorf("%s: %d %s, want 200 PUBLISHED_CONFIRMED", body, code, reply)
		}
	}
}
