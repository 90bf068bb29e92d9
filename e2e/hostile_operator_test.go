package e2e

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/forward"
)

// hostileOperatorToken is the ADMIN_TOKEN of these tests.
const hostileOperatorToken = "hostile-operator-token-0123456789abcdef"

// hostileAdminGet GETs path on the admin listener with the Host header set
// to host (what a browser sends when a page is opened by that name).
func hostileAdminGet(t *testing.T, p *process, host, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.admin+path, nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHostileOperatorPageByARebindingHostName: a page on evil.example whose
// name is rebound to 127.0.0.1 is, to the operator's browser, same-origin
// with the admin listener: its Origin is its own Host, so the CSRF check
// passes, and without a Host check it reads the routes and the dead letters
// (provider bodies) with no token at all. The real binary must refuse every
// /ui path addressed by a DNS name (421) and serve it by IP and localhost.
func TestHostileOperatorPageByARebindingHostName(t *testing.T) {
	p := startServe(t, minimalServe("http://127.0.0.1:1", "", ""), "ADMIN_TOKEN="+hostileOperatorToken)
	port := strings.TrimPrefix(p.admin, "http://127.0.0.1:")
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port} {
		if code, body := hostileAdminGet(t, p, host, "/ui"); code != http.StatusOK || !strings.Contains(body, "Routes") {
			t.Errorf("GET /ui with Host %s: %d, want 200 and the overview", host, code)
		}
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.nip.io:" + port, "localhost.evil.example:" + port} {
		for _, path := range []string{"/ui", "/ui/", "/ui/dead-letters", "/ui/style.css"} {
			code, body := hostileAdminGet(t, p, host, path)
			if code != http.StatusMisdirectedRequest || strings.Contains(body, "portal") || strings.Contains(body, "Routes <small>") {
				t.Errorf("GET %s with Host %s: %d, want 421 and no page content:\n%.300s", path, host, code, body)
			}
		}
	}
	// The rebinding page's replay: same-origin by its own name, the right
	// token guessed or not; refused before the token is looked at.
	form := url.Values{"id": {"ev-1"}, "operator": {"x"}, "reason": {"y"}, "token": {hostileOperatorToken}}
	req, _ := http.NewRequest(http.MethodPost, p.admin+"/ui/dead-letters/replay", strings.NewReader(form.Encode()))
	req.Host = "evil.example:" + port
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example:"+port)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("replay from a rebinding page: %d, want 421", resp.StatusCode)
	}
	eventually(t, 5*time.Second, "the refusal logged", func() bool { return strings.Contains(p.logs.String(), "DNS rebinding") })
	if strings.Contains(p.logs.String(), hostileOperatorToken) {
		t.Errorf("the operator token is in the logs")
	}
}

// TestHostileConfigCheckOfAHugeFile: a file of 200 000 routes made
// `borda config check` run out of memory (the YAML encoder of the
// effective configuration: 20 000 routes took 10 s and 1.4 GB). Every
// command reads its file through one bound (configs.MaxFileBytes) and
// refuses a larger file by its size, quickly and without quoting it.
func TestHostileConfigCheckOfAHugeFile(t *testing.T) {
	var b strings.Builder
	b.WriteString("environment: development\nroutes:\n")
	for i := 0; b.Len() <= 16<<20; i++ { // configs.MaxFileBytes
		fmt.Fprintf(&b, "  - name: r%d\n    path_prefix: /p%d\n    upstream: http://127.0.0.1:1\n", i, i)
	}
	path := secretsWriteConfig(t, b.String())
	out, code := secretsRun(t, cleanEnv(), "config", "check", "--config", path)
	if code != 2 || !strings.Contains(out, "larger than 16 MiB") || strings.Contains(out, "r1000") {
		t.Errorf("config check of a %d-byte file: exit %d (want 2, refused by its size):\n%.500s", b.Len(), code, out)
	}
	out, code = secretsRun(t, cleanEnv(), "serve", "--config", path)
	if code == 0 || !strings.Contains(out, "larger than 16 MiB") {
		t.Errorf("serve with a %d-byte file: exit %d (want refused by its size):\n%.500s", b.Len(), code, out)
	}
}

// hostileDLQIDs are event ids a provider's body can carry: a terminal
// escape with a forged row, a bidi override, invalid UTF-8 (and a NUL),
// each in the DLQ once.
var hostileDLQIDs = []string{"ev-\x1b[2J\x1b[31mRED\r\nFAKE ROW", "ev-\u202egnp.exe", "ev-\xff\xfe-bad\x00-utf8"}

// TestHostileDLQIDsAreShownPrintedAndReplayedByThatForm: the page showed
// hostile ids raw (a bidi override reorders the line; invalid UTF-8
// comes back from the browser's form as U+FFFD, so that letter could not
// be replayed), `dlq list` printed them Go-quoted but `dlq show` did not
// take the printed form, and the audit INSERT refused invalid UTF-8 and
// NUL, so such a letter could not be replayed at all. Now every view
// prints deadletter.Printed, every lookup accepts it, the audit records
// it, and nothing is lost from the DLQ on the way.
func TestHostileDLQIDsAreShownPrintedAndReplayedByThatForm(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	_, dbURL := servicetest.IsolatedDatabase(t)
	name := servicetest.Name(t)
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	exchange, fwdQ, dlq := name+".events", name+"-fwd", name+"-dlq"
	servicetest.DeleteAtCleanup(t, conn, []string{fwdQ, fwdQ + "-retry-1s", dlq}, []string{exchange})
	config := minimalServe("http://127.0.0.1:1", "", `webhook:
  path: /webhooks/whatsapp
  exchange: "`+exchange+`"
  routing_key: "`+name+`.rk"
forward:
  queue: "`+fwdQ+`"
  dlq: "`+dlq+`"
  url: "http://127.0.0.1:1/legacy"
  retry_delays: ["1s"]
`)
	config = strings.Replace(config, "amqp://guest:guest@127.0.0.1:1/", amqpURL, 1)
	env := []string{"DATABASE_URL=" + dbURL, "WEBHOOK_TOKENS=hostile-webhook-token", "ADMIN_TOKEN=" + hostileOperatorToken}
	cfgPath := secretsWriteConfig(t, strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(config))
	if out, code := secretsRun(t, append(cleanEnv(), env...), "migrate", "--config", cfgPath); code != 0 {
		t.Fatalf("borda migrate: exit %d\n%s", code, out)
	}
	srv := startServe(t, config, env...)
	eventually(t, 30*time.Second, "the DLQ declared by serve", func() bool {
		c, err := conn.Channel()
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = c.QueueDeclarePassive(dlq, true, false, false, false, nil)
		return err == nil
	})
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	for _, id := range hostileDLQIDs {
		// The body holds bidi controls too (fresh attack pass 19 A35: its
		// preview was shown raw, reordering what the operator read).
		body, err := envelope.New(id, "whatsapp", "application/json", nil, []byte("{\"event\":\"x\u202ey\u2066z\"}"), at).Encode()
		if err != nil {
			t.Fatal(err)
		}
		msg := amqp.Publishing{
			MessageId: id, DeliveryMode: amqp.Persistent, ContentType: envelope.ContentType, Body: body,
			Headers: amqp.Table{forward.HeaderDLQReason: "4xx", forward.HeaderFirstReason: "4xx", forward.HeaderDLQStatus: int32(422),
				forward.HeaderDLQExcerpt: "no\u202e\x1b[2J", forward.HeaderAttempt: int32(1),
				forward.HeaderDeadLetteredAt: at.Format(time.RFC3339Nano), forward.HeaderSource: "whatsapp"},
		}
		// A quorum queue exists (the passive declare above) a moment before
		// its leader runs; a publish in between is nacked (RabbitMQ 3.10,
		// seen in CI on 2026-12-07): publish until the broker confirms.
		eventually(t, 10*time.Second, "the letter "+strconv.Quote(id)+" confirmed into the DLQ", func() bool {
			dc, err := ch.PublishWithDeferredConfirm("", dlq, true, false, msg)
			if err != nil {
				t.Fatalf("publishing %q: %v", id, err)
			}
			return dc.Wait()
		})
	}
	cliEnv := append(cleanEnv(), env...)

	// The CLI: list prints every id quoted; show finds each by that form.
	out, code := secretsRun(t, cliEnv, "dlq", "list", "--config", cfgPath)
	for _, id := range hostileDLQIDs {
		if code != 0 || !strings.Contains(out, strconv.Quote(id)) {
			t.Errorf("dlq list: exit %d, want %s printed:\n%s", code, strconv.Quote(id), out)
		}
		sout, scode := secretsRun(t, cliEnv, "dlq", "show", "--config", cfgPath, strconv.Quote(id))
		if scode != 0 || !strings.Contains(sout, "id:                    "+strconv.Quote(id)) {
			t.Errorf("dlq show %s (the form dlq list prints): exit %d:\n%s", strconv.Quote(id), scode, sout)
		}
		if strings.ContainsAny(sout, "\u202e\u2066") || !strings.Contains(sout, `x\u202ey\u2066z`) {
			t.Errorf("dlq show %s: the body's bidi controls printed raw or not escaped:\n%q", strconv.Quote(id), sout)
		}
	}
	if strings.ContainsAny(out, "\x1b\u202e\x00") {
		t.Errorf("dlq list printed a raw control character:\n%q", out)
	}

	// The page: printed, nothing raw.
	code, page := hostileAdminGet(t, srv, strings.TrimPrefix(srv.admin, "http://"), "/ui/dead-letters")
	if code != http.StatusOK || strings.ContainsAny(page, "\x1b\u202e\x00\ufffd") || !utf8.ValidString(page) {
		t.Errorf("dead-letter page: %d, or a raw control character, bidi override or invalid UTF-8 in it:\n%q", code, page)
	}
	for _, id := range hostileDLQIDs {
		if !strings.Contains(page, html.EscapeString(strconv.Quote(id))) {
			t.Errorf("the page does not show %s", strconv.Quote(id))
		}
	}

	// Replay the invalid-UTF-8 one as a browser sends the form back.
	bad := hostileDLQIDs[2]
	form := url.Values{"id": {strconv.Quote(bad)}, "operator": {"ana"}, "reason": {"hostile id"}, "token": {hostileOperatorToken}}
	req, _ := http.NewRequest(http.MethodPost, srv.admin+"/ui/dead-letters/replay", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.admin)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("replaying %s from the page: %d, want 303:\n%s", strconv.Quote(bad), resp.StatusCode, b)
	}
	db, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var recorded, outcome string
	if err := db.QueryRow(context.Background(), `SELECT event_id, outcome FROM webhook_replays ORDER BY id DESC LIMIT 1`).Scan(&recorded, &outcome); err != nil {
		t.Fatal(err)
	}
	if recorded != strconv.Quote(bad) || outcome != "republished" {
		t.Errorf("webhook_replays: %q %s, want %q republished", recorded, outcome, strconv.Quote(bad))
	}
	eventually(t, 10*time.Second, "the other two letters kept and the replayed one in the forward queue", func() bool {
		c, err := conn.Channel()
		if err != nil {
			return false
		}
		defer c.Close()
		d, err1 := c.QueueDeclarePassive(dlq, true, false, false, false, nil)
		f, err2 := c.QueueDeclarePassive(fwdQ, true, false, false, false, nil)
		return err1 == nil && err2 == nil && d.Messages == 2 && f.Messages == 1
	})
}

// TestHostileConfigCheckOfAnOperatorTokenThatCannotReplay: ADMIN_TOKEN
// set where the operator page cannot replay passed `config check` in
// silence: with no DATABASE_URL every replay from the form answers 502,
// with the admin listener off, or neither a webhook pipeline nor a shared
// store (relax), there is nothing to act on. Each is now a warning naming
// what to set (exit 0).
func TestHostileConfigCheckOfAnOperatorTokenThatCannotReplay(t *testing.T) {
	env := append(cleanEnv(), "ADMIN_TOKEN="+hostileOperatorToken, "WEBHOOK_TOKENS=hostile-webhook-token")
	for file, want := range map[string]string{
		"environment: development\nwebhook: {path: /webhooks/whatsapp}\n":                        "database.url: the operator page's replay form (ADMIN_TOKEN is set) refuses every request",
		"environment: development\nadmin_listen: \"off\"\nwebhook: {path: /webhooks/whatsapp}\n": "admin_listen: ADMIN_TOKEN is set but the admin listener is off",
		"environment: development\n": "webhook.path: ADMIN_TOKEN is set but the operator page has nothing to act on",
	} {
		out, code := secretsRun(t, env, "config", "check", "--config", secretsWriteConfig(t, file))
		if code != 0 || !strings.Contains(out, "borda: warning: ") || !strings.Contains(out, want) || strings.Contains(out, hostileOperatorToken) {
			t.Errorf("config check of %q: exit %d, want 0 and the warning %q (never the token):\n%s", file, code, want, out)
		}
	}
	out, _ := secretsRun(t, append(env, "DATABASE_URL=postgres://postgres@127.0.0.1:1/test"), "config", "check", "--config",
		secretsWriteConfig(t, "environment: development\nwebhook: {path: /webhooks/whatsapp}\n"))
	if strings.Contains(out, "ADMIN_TOKEN is set") || strings.Contains(out, "replay form") {
		t.Errorf("config check warns of the replay with DATABASE_URL set:\n%s", out)
	}
}

// TestHostileDLQListUnderAMemoryAlarmLosesNothing: during a broker
// resource alarm (when an operator looks at the DLQ most) a listing could
// not put its letters back (the copy's publish is blocked): the letters it
// held went back to the queue when its channel closed, one delivery each,
// so a few listings under a delivery limit dropped them (the DLQ has no
// dead-letter target). Against a quorum DLQ with a delivery limit of 1,
// three `dlq list` runs and a `dlq show` under the alarm must leave the
// letter in the DLQ.
func TestHostileDLQListUnderAMemoryAlarmLosesNothing(t *testing.T) {
	// The alarm and the policy are node-wide: a node of this test's own.
	node := servicetest.PrivateBrokerAlone(t)
	amqpURL := servicetest.AMQPURL(t)
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	q := servicetest.Name(t) + "-dlq"
	servicetest.DeliveryLimitPolicy(t, node, q, 1)
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	servicetest.DeleteAtCleanup(t, conn, []string{q}, nil)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	body, err := envelope.New("ev-alarm-1", "whatsapp", "application/json", nil, []byte(`{"event":"x"}`), at).Encode()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm("", q, true, false, amqp.Publishing{
		MessageId: "ev-alarm-1", DeliveryMode: amqp.Persistent, ContentType: envelope.ContentType, Body: body,
		Headers: amqp.Table{forward.HeaderDLQReason: "4xx", forward.HeaderDeadLetteredAt: at.Format(time.RFC3339Nano)},
	})
	if err != nil || !dc.Wait() {
		t.Fatalf("publishing: %v", err)
	}
	path := secretsWriteConfig(t, "environment: development\namqp: {url: \""+amqpURL+"\"}\nforward: {dlq: "+q+"}\n")
	clear := servicetest.MemoryAlarm(t, node)
	for i := range 3 {
		out, code := secretsRun(t, cleanEnv(), "dlq", "list", "--config", path)
		if code != 1 || !strings.Contains(out, "the broker does not take publishes now") || !strings.Contains(out, "blocked") {
			t.Errorf("dlq list %d under the alarm: exit %d, want 1 naming the blocked broker:\n%s", i+1, code, out)
		}
	}
	out, code := secretsRun(t, cleanEnv(), "dlq", "show", "--config", path, "ev-alarm-1")
	if code != 1 || !strings.Contains(out, "the broker does not take publishes now") {
		t.Errorf("dlq show under the alarm: exit %d, want 1 naming the blocked broker:\n%s", code, out)
	}
	clear()
	out, code = secretsRun(t, cleanEnv(), "dlq", "list", "--config", path)
	if code != 0 || !strings.Contains(out, "ev-alarm-1") || !strings.Contains(out, "1 dead letter(s)") {
		t.Errorf("dlq list after the alarm: exit %d, want the letter still there:\n%s", code, out)
	}
	msg, ok, err := ch.Get(q, true)
	if err != nil || !ok {
		t.Fatalf("reading the letter back: %v %v", ok, err)
	}
	if n := fmt.Sprint(msg.Headers["x-delivery-count"]); n != "<nil>" && n != "0" {
		t.Errorf("x-delivery-count %v after the listings: want 0 (no delivery spent)", msg.Headers["x-delivery-count"])
	}
}
