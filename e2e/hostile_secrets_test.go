package e2e

// Secrets attacks (docs/configuration.md, "Secrets in URLs" and
// "Production guardrails"): a canary secret in every secret-bearing
// setting, then every output of the real binaries (config check, serve,
// forward with a failing legacy endpoint, dlq list) grepped for it.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
)

// secretsCanary is the prefix of every canary value: a 32-byte-plus
// secret, so production guardrails do not refuse it.
const secretsCanary = "CANARY7f3a9c"

// secretsHangUpAddr is a loopback address held for the whole test by a
// listener that hangs up on every connection: each client fails with a
// transport error. (A port that is merely closed can be taken by another
// test's server meanwhile, which then answers 404 instead of failing.)
func secretsHangUpAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// secretsCanaryEnv is one canary per secret-bearing setting, each in the
// place the setting holds its secret (password, lone user name, query
// value, token).
func secretsCanaryEnv(closedAddr string) map[string]string {
	c := func(what string) string { return secretsCanary + what + "0123456789abcdef0123456789" }
	return map[string]string{
		"REDIS_URL":                  "redis://default:" + c("redis") + "@" + closedAddr + "/0",
		"AMQP_URL":                   "amqp://guest:" + c("amqp") + "@" + closedAddr + "/",
		"DATABASE_URL":               "postgres://postgres:" + c("db") + "@" + closedAddr + "/test",
		"UPSTASH_REDIS_REST_URL":     "http://" + c("restuser") + "@" + closedAddr + "/?k=" + c("restq"),
		"UPSTASH_REDIS_REST_TOKEN":   c("resttoken"),
		"WEBHOOK_TOKENS":             c("webhook1") + "," + c("webhook2"),
		"LEGACY_WEBHOOK_URL":         "http://legacy:" + c("legacypass") + "@" + closedAddr + "/hook?token=" + c("legacytoken"),
		"LEGACY_WEBHOOK_HMAC_SECRET": c("hmac"),
		"AUTH_JWT_SECRET":            c("jwt"),
		"AUTH_JWKS_URL":              "http://" + closedAddr + "/jwks?key=" + c("jwks"),
		"ADMIN_PPROF_TOKEN":          c("pprof"),
		"ADMIN_TOKEN":                c("operator"),
	}
}

func secretsEnvList(m map[string]string) []string {
	out := cleanEnv()
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// secretsRun runs the binary to completion (bounded) and returns stdout
// and stderr together.
func secretsRun(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	bin := borda(t) // built first: the first caller's (race) build must not eat the command's 60 s
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("borda %v: %v", args, err)
	}
	return out.String(), code
}

func secretsWriteConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "borda.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func secretsGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func secretsAssertNoCanary(t *testing.T, what, out string) {
	t.Helper()
	if i := strings.Index(out, secretsCanary); i >= 0 {
		lo := max(0, i-200)
		t.Errorf("%s leaks a secret: …%s…", what, out[lo:min(len(out), i+80)])
	}
}

// TestConfigCheckPrintsNoSecretFromAnySetting: config check's output,
// and the validation errors of URLs that do not parse, hold no canary.
func TestConfigCheckPrintsNoSecretFromAnySetting(t *testing.T) {
	closed := secretsHangUpAddr(t)
	env := secretsCanaryEnv(closed)
	path := secretsWriteConfig(t, `environment: development
routes:
  - name: app
    upstream: "http://app:`+secretsCanary+`upstream0123456789abcdef@127.0.0.1:3000/?sig=`+secretsCanary+`upq"
`)
	out, code := secretsRun(t, secretsEnvList(env), "config", "check", "--config", path)
	if code != 0 {
		t.Fatalf("config check exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "legacy:xxxxx@") || !strings.Contains(out, "token=xxxxx") {
		t.Errorf("config check no longer shows where forward.url points:\n%s", out)
	}
	secretsAssertNoCanary(t, "config check", out)

	// Invalid URL values: the problem names the field, never the secret.
	bad := map[string]string{
		"LEGACY_WEBHOOK_URL": "legacy:" + secretsCanary + "x@host/hook",                    // no scheme
		"AUTH_JWKS_URL":      "ftp://u:" + secretsCanary + "y@idp/jwks?k=" + secretsCanary, // wrong scheme
		"REDIS_URL":          "redis://u:" + secretsCanary + "%zz@127.0.0.1:6379",          // bad escape
		"AMQP_URL":           "http://guest:" + secretsCanary + "@127.0.0.1/",              // wrong scheme
	}
	out, code = secretsRun(t, secretsEnvList(bad), "config", "check", "--config", path)
	if code != 2 || !strings.Contains(out, "forward.url") || !strings.Contains(out, "auth.jwks_url") || !strings.Contains(out, "redis.url") {
		t.Fatalf("config check of bad URLs: exit %d:\n%s", code, out)
	}
	secretsAssertNoCanary(t, "config check validation errors", out)
}

// TestServeWithFailingDependenciesPrintsNoSecret: serve with every
// dependency unreachable (so each client logs its errors) and an upstream
// with userinfo: logs, /metrics and the admin /readyz hold no canary.
func TestServeWithFailingDependenciesPrintsNoSecret(t *testing.T) {
	closed := secretsHangUpAddr(t)
	env := secretsCanaryEnv(closed)
	var envList []string
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	cfg := minimalServe("http://app:"+secretsCanary+"upstream0123456789abcdef@"+closed+"/?sig="+secretsCanary+"q", "",
		"webhook:\n  path: /webhooks/whatsapp\n")
	cfg = strings.Replace(cfg, "telemetry:\n  enabled: false\n", "telemetry:\n  enabled: true\n", 1)
	p := startServe(t, cfg, append(envList, "BORDA_LOG_LEVEL=debug")...)
	get(t, p.public+"/anything?x=1", "").Body.Close() // 502: the upstream is closed
	req, _ := http.NewRequest(http.MethodPost, p.public+"/webhooks/whatsapp/t/"+env["WEBHOOK_TOKENS"][:40]+"/messages", strings.NewReader(`{"event":"x"}`))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	var outputs strings.Builder
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) { // until the background dials have failed and logged
		if strings.Contains(p.logs.String(), "refused") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	outputs.WriteString(secretsGet(t, p.admin+"/readyz"))
	outputs.WriteString(secretsGet(t, p.admin+"/metrics"))
	p.stop(t)
	outputs.WriteString(p.logs.String())
	if !strings.Contains(outputs.String(), "refused") {
		t.Logf("no dependency error was logged; the grep covers less:\n%s", outputs.String())
	}
	secretsAssertNoCanary(t, "serve (logs, /readyz, /metrics)", outputs.String())
}

// TestForwardAndDLQPrintNoLegacyURLSecret: the legacy endpoint is
// unreachable, so each POST fails with a *url.Error naming
// LEGACY_WEBHOOK_URL; after the one retry the event is dead-lettered.
// forward's logs and /metrics, the dead letter's headers and `borda dlq
// list` hold no canary.
func TestForwardAndDLQPrintNoLegacyURLSecret(t *testing.T) {
	redisURL := servicetest.RedisURL(t)
	amqpURL := servicetest.AMQPURL(t)
	closed := secretsHangUpAddr(t)
	canary := secretsCanaryEnv(closed)
	name := servicetest.Name(t)
	queue, dlq := name+"-fwd", name+"-dlq"
	t.Cleanup(func() {
		conn, err := amqp.Dial(amqpURL)
		if err != nil {
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		for _, q := range []string{queue, dlq, queue + "-retry-1s"} {
			_, _ = ch.QueueDelete(q, false, false, false)
		}
		_ = ch.ExchangeDelete(name+"-ex", false, false)
	})
	yaml := `environment: development
admin_listen: "{ADMIN}"
listen: "{LISTEN}"
redis:
  key_prefix: "` + servicetest.KeyPrefix(t) + `"
telemetry:
  enabled: false
webhook:
  path: /webhooks/whatsapp
  exchange: ` + name + `-ex
  routing_key: ` + name + `.rk
  queue_type: classic
forward:
  queue: ` + queue + `
  dlq: ` + dlq + `
  events_queue: ` + name + `-events
  retry_delays: [1s]
  timeout: 2s
`
	env := []string{
		"REDIS_URL=" + redisURL, "AMQP_URL=" + amqpURL,
		"WEBHOOK_TOKENS=" + canary["WEBHOOK_TOKENS"],
		"LEGACY_WEBHOOK_URL=" + canary["LEGACY_WEBHOOK_URL"],
		"LEGACY_WEBHOOK_HMAC_SECRET=" + canary["LEGACY_WEBHOOK_HMAC_SECRET"],
	}
	fwdAdmin := freePort(t)
	fwdPath := secretsWriteConfig(t, strings.NewReplacer("{ADMIN}", freePort(t), "{LISTEN}", freePort(t)).Replace(yaml))
	fwdLogs := &syncBuffer{}
	fwd := exec.Command(borda(t), "forward", "--config", fwdPath, "--admin", fwdAdmin)
	fwd.Env = append(cleanEnv(), env...)
	fwd.Stdout, fwd.Stderr = fwdLogs, fwdLogs
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	fwdDone := make(chan error, 1)
	go func() { fwdDone <- fwd.Wait() }()
	stopFwd := func() {
		if fwd.ProcessState != nil {
			return
		}
		_ = fwd.Process.Signal(os.Interrupt)
		select {
		case <-fwdDone:
		case <-time.After(15 * time.Second):
			_ = fwd.Process.Kill() // by PID: only the process this test started
			<-fwdDone
		}
	}
	t.Cleanup(stopFwd)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(fwdLogs.String(), `"forwarding"`) {
		if time.Now().After(deadline) {
			t.Fatalf("borda forward did not start:\n%s", fwdLogs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	p := startServe(t, yaml, env...)
	deadline = time.Now().Add(20 * time.Second)
	for { // the broker is dialled in the background
		resp, err := http.Get(p.public + "/readyz/webhook")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook ingress did not become ready:\n%s", p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodPost, p.public+"/webhooks/whatsapp/messages-upsert",
		strings.NewReader(`{"instance":"i1","event":"messages.upsert","data":{"key":{"id":"`+name+`"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.Split(canary["WEBHOOK_TOKENS"], ",")[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("webhook answered %d\n%s", resp.StatusCode, p.logs.String())
	}

	deadline = time.Now().Add(30 * time.Second)
	for !strings.Contains(fwdLogs.String(), "event dead-lettered") {
		if time.Now().After(deadline) {
			t.Fatalf("the event was not dead-lettered within 30 s:\n%s", fwdLogs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	metrics := secretsGet(t, "http://"+fwdAdmin+"/metrics")
	stopFwd()
	p.stop(t)

	list, code := secretsRun(t, append(cleanEnv(), env...), "dlq", "list", "--config", fwdPath)
	if code != 0 || !strings.Contains(list, "1 dead letter") {
		t.Fatalf("dlq list exit %d, want the dead letter listed:\n%s", code, list)
	}
	secretsAssertNoCanary(t, "borda forward logs", fwdLogs.String())
	secretsAssertNoCanary(t, "borda forward /metrics", metrics)
	secretsAssertNoCanary(t, "borda serve logs", p.logs.String())
	secretsAssertNoCanary(t, "borda dlq list", list)

	// The dead letter's headers themselves, as stored in the broker.
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := ch.Get(dlq, false)
	if err != nil || !ok {
		t.Fatalf("reading the DLQ: ok %v, %v", ok, err)
	}
	defer func() { _ = d.Nack(false, true) }()
	var headers strings.Builder
	for k, v := range d.Headers {
		headers.WriteString(k + "=" + strings.TrimSpace(strings.ReplaceAll(secretsHeaderText(v), "\n", " ")) + "\n")
	}
	if !strings.Contains(headers.String(), "x-borda-dlq-excerpt=Post") || !strings.Contains(headers.String(), "legacy:xxxxx@") {
		t.Fatalf("the dead letter has no (redacted) transport error in its excerpt header:\n%s", headers.String())
	}
	secretsAssertNoCanary(t, "the dead letter's headers", headers.String())
}

// TestProductionRefusesWeakSettingsAtStart: config check and serve both
// refuse a production file trusting 0.0.0.0/0 with a short WEBHOOK_TOKENS,
// naming the fields and not the token; the documented override starts it
// with warnings.
func TestProductionRefusesWeakSettingsAtStart(t *testing.T) {
	cfg := strings.Replace(minimalServe("http://127.0.0.1:1", "", "trusted_proxies: [\"::ffff:0:0/96\"]\n"),
		"environment: development", "environment: production", 1)
	path := secretsWriteConfig(t, strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(cfg))
	env := append(cleanEnv(), "WEBHOOK_TOKENS=shorttok", "AUTH_JWT_SECRET=shortjwt")
	for _, args := range [][]string{{"config", "check", "--config", path}, {"serve", "--config", path}} {
		out, code := secretsRun(t, env, args...)
		if code != 2 || !strings.Contains(out, "trusted_proxies[0]") || !strings.Contains(out, "WEBHOOK_TOKENS[0]") || !strings.Contains(out, "AUTH_JWT_SECRET") {
			t.Errorf("borda %s: exit %d, want 2 naming the three problems:\n%s", args[0], code, out)
		}
		if strings.Contains(out, "shorttok") || strings.Contains(out, "shortjwt") {
			t.Errorf("borda %s echoes a secret:\n%s", args[0], out)
		}
	}
	out, code := secretsRun(t, append(env, "BORDA_ALLOW_WEAK_PRODUCTION=1"), "config", "check", "--config", path)
	if code != 0 || strings.Count(out, "borda: warning:") != 3 {
		t.Errorf("with BORDA_ALLOW_WEAK_PRODUCTION=1: exit %d, want 0 and 3 warnings:\n%s", code, out)
	}
}

// TestHostilePprofByARebindingHostName: a page on evil.example rebound to
// 127.0.0.1 reaches /debug/pprof/ from the operator's own browser, a
// loopback peer, as the operator page's rebinding attack did; the
// loopback gate refuses a Host that is a DNS name (every spelling): the
// admin plane's rebinding check answers 421 before pprof is reached (B10:
// every admin path), and the listener's own address and localhost are
// still served.
func TestHostilePprofByARebindingHostName(t *testing.T) {
	p := startServe(t, minimalServe("http://127.0.0.1:1", "", ""))
	for _, host := range []string{"evil.example", "evil.example:9091", "127.0.0.1.nip.io", "localhost.evil.example", "EVIL.example."} {
		for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/", "/debug/pprof/heap"} {
			if got := get(t, p.admin+path, host); got.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("%s with Host %q = %d, want 421", path, host, got.StatusCode)
			}
		}
	}
	for _, host := range []string{"", "localhost", "[::1]:1"} {
		if got := get(t, p.admin+"/debug/pprof/cmdline", host); got.StatusCode != 200 {
			t.Errorf("/debug/pprof/cmdline with Host %q = %d, want 200", host, got.StatusCode)
		}
	}
}

// TestPprofIsNotServedToTheNetworkByDefault: the admin listener bound to
// all interfaces (as production.yaml does) answers /metrics and /readyz to
// any peer but /debug/pprof/ only to loopback; reached through a
// non-loopback address of this host it is 404.
func TestPprofIsNotServedToTheNetworkByDefault(t *testing.T) {
	p := startServe(t, minimalServe("http://127.0.0.1:1", "", ""))
	if got := get(t, p.admin+"/debug/pprof/cmdline", ""); got.StatusCode != 200 {
		t.Errorf("loopback /debug/pprof/cmdline = %d, want 200", got.StatusCode)
	}
	// A loopback peer is the only kind this sandbox has; the gate's
	// non-loopback answers are covered by gateway's
	// TestPprofFromTheClusterNetworkIsRefusedByDefault.
	tok := startServe(t, minimalServe("http://127.0.0.1:1", "", "admin_pprof: token\n"), "ADMIN_PPROF_TOKEN="+strings.Repeat("k", 32))
	if got := get(t, tok.admin+"/debug/pprof/cmdline", ""); got.StatusCode != 401 {
		t.Errorf("token mode without the token: %d, want 401", got.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, tok.admin+"/debug/pprof/cmdline", nil)
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("k", 32))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("token mode with the token: %v %v", resp, err)
	}
	if got := get(t, tok.admin+"/metrics", ""); got.StatusCode != 200 {
		t.Errorf("/metrics = %d in token mode, want 200", got.StatusCode)
	}
	secretsAssertNoCanary(t, "serve logs", tok.logs.String())
	if strings.Contains(tok.logs.String(), strings.Repeat("k", 32)) {
		t.Errorf("the pprof token is logged:\n%s", tok.logs.String())
	}
}

func secretsHeaderText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}

// Fresh attack pass A60: a production file sending credentials in
// cleartext to remote hosts (an http:// Upstash REST URL, plain amqp://,
// PostgreSQL with sslmode=disable, an http:// legacy URL) passed `borda
// config check` with exit 0 and no word. Config check and serve refuse
// it, naming each field and host and never a password; the test-rig
// override makes them warnings, and cleartext_hosts names hosts the
// operator trusts.
func TestHostileProductionCleartextCredentialsToRemoteHostsAreNamed(t *testing.T) {
	const strong = "0123456789abcdef0123456789abcdef"
	cfg := strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(
		strings.Replace(minimalServe("http://127.0.0.1:1", "", ""), "environment: development", "environment: production", 1))
	path := secretsWriteConfig(t, cfg)
	env := append(cleanEnv(),
		"UPSTASH_REDIS_REST_URL=http://upstash.example.com", "UPSTASH_REDIS_REST_TOKEN="+strong,
		"AMQP_URL=amqp://guest:CANARYamqp@rabbit.example.com:5672/atk2",
		"DATABASE_URL=postgres://postgres:CANARYpg@db.example.com:5432/atk2?sslmode=disable",
		"LEGACY_WEBHOOK_URL=http://legacy.example.com/hook", "LEGACY_WEBHOOK_HMAC_SECRET="+strong,
		"WEBHOOK_TOKENS="+strong)
	// The Upstash REST token over http:// is refused (exit 2); the other
	// cleartext connections (commonly in-cluster) are one warning each.
	for _, args := range [][]string{{"config", "check", "--config", path}, {"serve", "--config", path}} {
		out, code := secretsRun(t, env, args...)
		if code != 2 || !strings.Contains(out, "redis.rest_url") || !strings.Contains(out, "upstash.example.com") {
			t.Errorf("borda %s: exit %d, want 2 naming redis.rest_url and its host:\n%s", args[0], code, out)
		}
		if strings.Contains(out, "CANARY") || strings.Contains(out, strong) {
			t.Errorf("borda %s echoes a credential:\n%s", args[0], out)
		}
	}
	var noREST []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "UPSTASH_REDIS_REST_") {
			noREST = append(noREST, kv)
		}
	}
	out, code := secretsRun(t, noREST, "config", "check", "--config", path)
	if code != 0 || strings.Count(out, "borda: warning:") < 3 {
		t.Errorf("cleartext AMQP, PostgreSQL and legacy URL: exit %d, want 0 and their warnings:\n%s", code, out)
	}
	for _, f := range []string{"amqp.url", "rabbit.example.com", "database.url", "db.example.com", "forward.url", "legacy.example.com"} {
		if !strings.Contains(out, f) {
			t.Errorf("config check does not name %s:\n%s", f, out)
		}
	}
	if strings.Contains(out, "CANARY") || strings.Contains(out, strong) {
		t.Errorf("config check echoes a credential:\n%s", out)
	}
	out, code = secretsRun(t, append(env, "BORDA_ALLOW_WEAK_PRODUCTION=1"), "config", "check", "--config", path)
	if code != 0 || strings.Count(out, "borda: warning:") < 4 {
		t.Errorf("with BORDA_ALLOW_WEAK_PRODUCTION=1: exit %d, want 0 and 4 warnings:\n%s", code, out)
	}
	trusted := secretsWriteConfig(t, cfg+"cleartext_hosts: [upstash.example.com, rabbit.example.com, db.example.com, legacy.example.com]\n")
	if out, code := secretsRun(t, env, "config", "check", "--config", trusted); code != 0 || strings.Contains(out, "warning") {
		t.Errorf("with every host in cleartext_hosts: exit %d, want 0 and no warning:\n%s", code, out)
	}
	// Loopback URLs (the test rigs, CI's production e2e) pass untouched.
	local := append(cleanEnv(), "REDIS_URL=redis://127.0.0.1:6379/0", "AMQP_URL=amqp://guest:guest@127.0.0.1:5672/",
		"DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "LEGACY_WEBHOOK_URL=http://127.0.0.1:8081/hook",
		"LEGACY_WEBHOOK_HMAC_SECRET="+strong, "WEBHOOK_TOKENS="+strong)
	if out, code := secretsRun(t, local, "config", "check", "--config", path); code != 0 || strings.Contains(out, "warning") {
		t.Errorf("loopback URLs: exit %d, want 0 and no warning:\n%s", code, out)
	}
}
