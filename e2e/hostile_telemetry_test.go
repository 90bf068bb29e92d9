package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
)

// telemetryRig is one test's Redis key prefix, PostgreSQL schema (with
// gateway_metrics migrated by the real `borda migrate`) and the config
// file both `borda serve` and `borda aggregate` read.
type telemetryRig struct {
	rdb    redis.UniversalClient
	ks     keyspace.Keyspace
	db     *pgxpool.Pool
	config string // serve config, {LISTEN}/{ADMIN} not yet replaced
	file   string // the same config written for the one-shot commands
}

func newTelemetryRig(t *testing.T, upstream string) *telemetryRig {
	t.Helper()
	redisURL := servicetest.RedisURL(t)
	db, dbURL := servicetest.IsolatedDatabase(t)
	r := &telemetryRig{
		rdb: servicetest.RedisClient(t, redisURL, false),
		ks:  keyspace.MustNew(servicetest.KeyPrefix(t)),
		db:  db,
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := r.rdb.Scan(ctx, 0, r.ks.Prefix()+"*", 1000).Iterator()
		for iter.Next(ctx) {
			r.rdb.Del(ctx, iter.Val())
		}
	})
	r.config = fmt.Sprintf(`environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: %q
  key_prefix: %q
database:
  url: %q
amqp:
  url: "amqp://guest:guest@127.0.0.1:1/"
telemetry:
  enabled: true
  flush_every: 100ms
  aggregate_every: 1h
routes:
  - name: app
    path_prefix: /
    upstream: %q
`, redisURL, r.ks.Prefix(), dbURL, upstream)
	r.file = filepath.Join(t.TempDir(), "oneshot.yaml")
	oneshot := strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(r.config)
	if err := os.WriteFile(r.file, []byte(oneshot), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := r.run(t, "migrate"); code != 0 {
		t.Fatalf("borda migrate exited %d:\n%s", code, out)
	}
	return r
}

// serveWithoutDatabase is the serve config with database.url removed, so
// the serve does not aggregate by itself.
func (r *telemetryRig) serveWithoutDatabase() string {
	i := strings.Index(r.config, "database:\n")
	j := strings.Index(r.config, "amqp:\n")
	return r.config[:i] + r.config[j:]
}

// run runs a one-shot borda command with the rig's config and returns its
// combined output and exit code.
func (r *telemetryRig) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	bin := borda(t) // built before the command's 60 s start: a -race build on a loaded machine takes most of it
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--config", r.file)...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("running borda %v: %v", args, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// waitForCounter waits (bounded) until the counters matching pattern
// under the rig's prefix sum to at least want: a key's existence proves
// only that the first flush landed, and the recorder may flush one
// endpoint's requests across several batches.
func (r *telemetryRig) waitForCounter(t *testing.T, pattern string, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var sum int64
	for time.Now().Before(deadline) {
		// The whole keyspace, page by page: one SCAN page (cursor 0) of a
		// shared Redis holding other tests' keys need not hold the match.
		sum = 0
		it := r.rdb.Scan(t.Context(), 0, r.ks.Prefix()+pattern, 1000).Iterator()
		for it.Next(t.Context()) {
			n, err := r.rdb.Get(t.Context(), it.Val()).Int64()
			if err == nil {
				sum += n
			}
		}
		if sum >= want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("counters %s%s sum to %d within 10 s, want %d", r.ks.Prefix(), pattern, sum, want)
}

// rows returns the rig's gateway_metrics rows as "kind dimension count".
func (r *telemetryRig) rows(t *testing.T) []string {
	t.Helper()
	rows, err := r.db.Query(t.Context(), `SELECT kind, dimension, sum(count) FROM gateway_metrics
		WHERE environment = 'development' GROUP BY kind, dimension ORDER BY kind, dimension`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var kind, dim string
		var n int64
		if err := rows.Scan(&kind, &dim, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %d", kind, dim, n))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 13 item 5: one request with "%ff" or "%00" in its path became a
// telemetry key whose row PostgreSQL refused, and every `borda aggregate`
// failed for the key's 2 h. Every member of the class (invalid UTF-8 raw
// or percent-encoded, overlong forms, NUL, C0, DEL, C1) is sent through
// the real binary; the one-shot aggregation succeeds, the good rows land,
// the hostile paths count as app:other, and a poisoned key an older Borda
// left in Redis is skipped and counted.
func TestHostilePathsDoNotPoisonTheAggregation(t *testing.T) {
	up := recordingUpstream(t)
	rig := newTelemetryRig(t, up.URL)
	// serve without the database: only the one-shot aggregates here.
	p := startServe(t, rig.serveWithoutDatabase())
	hostile := []string{
		"/a/%ff", "/a/%FF%FE", "/a/%00", "/a/x%00y", "/a/%c0%af", "/a/%c0%80", "/a/%ed%a0%80",
		"/a/%e2%82", "/a/%1b%5b31m", "/a/%0d%0aforged", "/a/%09", "/a/%7f", "/a/%c2%85", "/a/%c2%9b",
		"/a/\xff", "/a/\xc3\xa7\xfe",
		"/" + strings.Repeat("z", 400),
	}
	good := []string{"/api/alunos/42", "/api/alunos/43", "/a%C3%A7%C3%A3o"}
	for _, path := range append(hostile, good...) {
		resp, _, err := rawExchange(t, p.public, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
		if err != nil {
			t.Fatalf("GET %q: %v", path, err)
		}
		t.Logf("GET %q → %d", path, resp.StatusCode)
	}
	rig.waitForCounter(t, "m:app:/api/alunos/{id}:*", 2)
	rig.waitForCounter(t, "m:app:/ação:*", 1)
	// What a Borda without the fix wrote for "/a/%ff" and "/a/%00".
	minute := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	for _, dim := range []string{"app:/a/\xff", "app:/a/\x00", "escola:e\x00"} {
		if err := rig.rdb.Set(t.Context(), rig.ks.Metric(dim, minute), 1, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}

	out, code := rig.run(t, "aggregate")
	t.Logf("borda aggregate:\n%s", out)
	if code != 0 {
		t.Fatalf("borda aggregate exited %d, want 0", code)
	}
	if !strings.Contains(out, "3 invalid") {
		t.Errorf("the report does not count the 3 poisoned keys as invalid: %s", out)
	}
	rows := rig.rows(t)
	t.Logf("rows: %q", rows)
	has := func(prefix string) bool {
		for _, r := range rows {
			if strings.HasPrefix(r, prefix) {
				return true
			}
		}
		return false
	}
	for _, want := range []string{"endpoint app:/api/alunos/{id} 2", "endpoint app:/ação 1", "endpoint app:other "} {
		if !has(want) {
			t.Errorf("no row %q", want)
		}
	}
	for _, r := range rows {
		if !utf8.ValidString(r) || strings.ContainsFunc(r, func(c rune) bool { return c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f) }) {
			t.Errorf("row %q holds invalid text", r)
		}
		if strings.HasPrefix(r, "endpoint app:/a/") {
			t.Errorf("hostile path landed as its own row: %q", r)
		}
	}
	// The other-counted paths show in the metric operators watch.
	resp := get(t, p.admin+"/metrics", "")
	defer resp.Body.Close()
	metrics, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(metrics), `borda_telemetry_invalid_values_total{dimension="endpoint"}`) {
		t.Errorf("/metrics has no borda_telemetry_invalid_values_total{dimension=\"endpoint\"}")
	}
}

// Issue 16 §2.3: a `borda serve` with a database aggregates at start and
// then kept the lock for 54 minutes, so an operator's `borda aggregate`
// printed "skipped" for most of every hour. Now it runs.
func TestOneShotAggregateRunsRightAfterServeAggregated(t *testing.T) {
	up := recordingUpstream(t)
	rig := newTelemetryRig(t, up.URL)
	p := startServe(t, rig.config)
	// serve's first turn, at start.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if strings.Contains(p.logs.String(), `"msg":"telemetry aggregated"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not aggregate within 15 s:\n%s", p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, _, err := rawExchange(t, p.public, "GET /api/alunos/7 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	rig.waitForCounter(t, "m:app:/api/alunos/{id}:*", 1)
	if n, _ := rig.rdb.Exists(t.Context(), rig.ks.AggregateInterval()).Result(); n != 1 {
		t.Errorf("serve's turn did not mark the interval done (%s)", rig.ks.AggregateInterval())
	}
	out, code := rig.run(t, "aggregate")
	if code != 0 || strings.Contains(out, "skipped: ") || !strings.Contains(out, "aggregated 2 counters") {
		t.Fatalf("borda aggregate right after serve's turn: exit %d\n%s", code, out)
	}
	if rows := rig.rows(t); !strings.Contains(strings.Join(rows, "\n"), "endpoint app:/api/alunos/{id} 1") {
		t.Errorf("rows = %q, want the request counted", rows)
	}
}

// Issue 22 item 7: format characters (Unicode Cf: bidi overrides and
// isolates, zero-width, BOM) and line separators in a path became
// telemetry keys and gateway_metrics rows, so a dashboard showed text other
// than what was counted. Through the real binary they count as app:other,
// like the control characters, and no row holds a Cc or Cf rune.
func TestHostileFormatCharactersDoNotReachTheDashboard(t *testing.T) {
	up := recordingUpstream(t)
	rig := newTelemetryRig(t, up.URL)
	p := startServe(t, rig.serveWithoutDatabase())
	hostile := []string{
		"/b/%e2%80%aetxt.exe", // U+202E RIGHT-TO-LEFT OVERRIDE
		"/b/%e2%80%aa",        // U+202A
		"/b/%e2%81%a7x",       // U+2067 RIGHT-TO-LEFT ISOLATE
		"/ad%e2%80%8bmin",     // U+200B ZERO WIDTH SPACE
		"/b/%e2%80%8f",        // U+200F RIGHT-TO-LEFT MARK
		"/%ef%bb%bfapi",       // U+FEFF BOM
		"/ad%c2%admin",        // U+00AD SOFT HYPHEN
		"/b/%e2%80%a8x",       // U+2028 LINE SEPARATOR
		"/b/%f3%a0%81%81",     // U+E0041 TAG LATIN CAPITAL LETTER A
	}
	for _, path := range append(hostile, "/a%C3%A7%C3%A3o") {
		resp, _, err := rawExchange(t, p.public, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
		if err != nil {
			t.Fatalf("GET %q: %v", path, err)
		}
		t.Logf("GET %q → %d", path, resp.StatusCode)
	}
	rig.waitForCounter(t, "m:app:/ação:*", 1)
	if out, code := rig.run(t, "aggregate"); code != 0 {
		t.Fatalf("borda aggregate exited %d:\n%s", code, out)
	}
	rows := rig.rows(t)
	t.Logf("rows: %q", rows)
	other := false
	for _, r := range rows {
		other = other || strings.HasPrefix(r, "endpoint app:other ")
		if strings.ContainsFunc(r, func(c rune) bool { return unicode.In(c, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) }) {
			t.Errorf("row %q holds a control or format character", r)
		}
		if strings.HasPrefix(r, "endpoint app:/b/") || strings.HasPrefix(r, "endpoint app:/ad") {
			t.Errorf("hostile path landed as its own row: %q", r)
		}
	}
	if !other {
		t.Errorf("no endpoint app:other row: the hostile paths were not counted")
	}
}

// Answers the gateway makes on its own were counted as answered
// endpoints (fresh attack pass A016): 250 CORS preflights on distinct
// paths from one anonymous client (204, no rate-limit budget spent), or
// OPTIONS with Max-Forwards: 0 (200), filled telemetry.max_endpoints_per_route
// and the route's real endpoint counted as app:other for the rest of the
// minute. Now they count like refused requests: at most 16 keys of their
// own a minute, and the served endpoint keeps its key.
func TestHostileGatewayAnswersFillTheEndpointCap(t *testing.T) {
	up := recordingUpstream(t)
	rig := newTelemetryRig(t, up.URL)
	config := strings.Replace(rig.serveWithoutDatabase(), "routes:\n", `cors:
  policies:
    portal:
      allowed_origins: ["https://portal.example"]
routes:
`, 1) + "    cors: portal\n"
	p := startServe(t, config)
	for i := range 250 {
		code, _, _ := rawOptions(t, p.public, fmt.Sprintf("/api/zz%dw", i), "Origin: https://evil.example", "Access-Control-Request-Method: GET")
		if code >= 500 {
			t.Fatalf("preflight %d: %d", i, code)
		}
	}
	for i := range 30 {
		if code, _, _ := rawOptions(t, p.public, fmt.Sprintf("/mf%dq", i), "Max-Forwards: 0"); code != 200 {
			t.Fatalf("OPTIONS Max-Forwards: 0: %d, want 200", code)
		}
	}
	resp := get(t, p.public+"/api/alunos/42/notas", "")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET the real endpoint: %d", resp.StatusCode)
	}
	rig.waitForCounter(t, "m:app:/api/alunos/{id}/notas:*", 1)
	n := 0
	it := rig.rdb.Scan(t.Context(), 0, rig.ks.Prefix()+"m:app:*", 1000).Iterator()
	for it.Next(t.Context()) {
		n++
	}
	// The real endpoint, at most 16 refused templates, app:refused (the
	// minute may turn during the test: twice that).
	if n > 2*(1+16+1) {
		t.Errorf("%d endpoint keys for app after 280 gateway-made answers, want at most %d", n, 2*(1+16+1))
	}
}

// rawOptions sends OPTIONS path with the given header lines.
func rawOptions(t *testing.T, base, path string, lines ...string) (int, http.Header, string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "OPTIONS %s HTTP/1.1\r\nHost: gw.localhost\r\nConnection: close\r\n", path)
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("\r\n")
	resp, reply, err := rawExchange(t, base, b.String(), 10*time.Second)
	if err != nil {
		t.Fatalf("OPTIONS %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, reply
}

// One-time secrets in portal paths (a magic-login link, a password reset
// token) became telemetry keys and gateway_metrics rows kept for 90 days
// (fresh attack pass A051). Token-like segments are templated to {id}:
// no key holds the secret, and the endpoint is counted under its template.
func TestHostileSecretsInPortalPathsNeverBecomeKeys(t *testing.T) {
	up := recordingUpstream(t)
	rig := newTelemetryRig(t, up.URL)
	p := startServe(t, rig.serveWithoutDatabase())
	secrets := []string{"Zx9_3kLq-8vT2mNbR7wYp4QsUe6", "c4rz9u-2f5a6b7c8d9e0f1a2b3c"}
	for _, path := range []string{"/api/auth/magic/" + secrets[0], "/reset/MQ/" + secrets[1] + "/"} {
		resp := get(t, p.public+path, "")
		resp.Body.Close()
	}
	rig.waitForCounter(t, "m:app:/api/auth/magic/{id}:*", 1)
	rig.waitForCounter(t, "m:app:/reset/MQ/{id}/:*", 1)
	it := rig.rdb.Scan(t.Context(), 0, rig.ks.Prefix()+"*", 1000).Iterator()
	for it.Next(t.Context()) {
		for _, s := range secrets {
			if strings.Contains(it.Val(), s) {
				t.Errorf("key %q holds the secret %q", it.Val(), s)
			}
		}
	}
}

// Fresh attack passes A35 and A36: secrets spelled with ';', '=', '+' or
// ',' (a servlet session id in a path parameter, ";token=", padded or
// '+'-bearing base64, a ','-joined token), an e-mail address and a CPF
// were Redis keys and gateway_metrics rows verbatim, and ";<n>" made a
// distinct endpoint per n, filling the route's cap. Path parameters are
// dropped and such segments are {id}: no key and no row holds the secret,
// and fifty ";<n>" spellings are one endpoint.
func TestHostileSecretsSpelledWithParamsOrBase64NeverBecomeKeys(t *testing.T) {
	up := recordingUpstream(t)
	rig := newTelemetryRig(t, up.URL)
	p := startServe(t, rig.serveWithoutDatabase())
	secrets := []string{"9A3F2B7C1D4E5F60718293A4B5C6D7E8", "Zx9Qm2LkP4vR8tWy", "dGhpcyBpcyBhIHNlY3JldCB0b2tlbg", "user@example.com", "123.456.789-09", "jsessionid", "token="}
	paths := []string{
		"/app;jsessionid=9A3F2B7C1D4E5F60718293A4B5C6D7E8/home",
		"/magic-login;token=Zx9Qm2LkP4vR8tWyZx9Qm2LkP4vR8tWy",
		"/magic/dGhpcyBpcyBhIHNlY3JldCB0b2tlbg==",
		"/r/Zx9Qm2LkP4vR8tWy%2BZx9Qm2LkP4vR8tWy",
		"/reset/Zx9Qm2LkP4vR8tWy,Zx9Qm2LkP4vR8tWyQQ",
		"/mail/user@example.com",
		"/cpf/123.456.789-09",
	}
	for n := range 50 {
		paths = append(paths, fmt.Sprintf("/third;%d/a", n))
	}
	for _, path := range paths {
		resp, _, err := rawExchange(t, p.public, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
		if err != nil {
			t.Fatalf("GET %q: %v", path, err)
		}
		if resp.StatusCode != 200 {
			t.Errorf("GET %q → %d, want 200 (the upstream's)", path, resp.StatusCode)
		}
	}
	for _, want := range []string{"/app/home", "/magic-login", "/magic/{id}", "/r/{id}", "/reset/{id}", "/mail/{id}", "/cpf/{id}"} {
		rig.waitForCounter(t, "m:app:"+want+":*", 1)
	}
	rig.waitForCounter(t, "m:app:/third/a:*", 50)
	third := 0
	it := rig.rdb.Scan(t.Context(), 0, rig.ks.Prefix()+"*", 1000).Iterator()
	for it.Next(t.Context()) {
		for _, s := range secrets {
			if strings.Contains(it.Val(), s) {
				t.Errorf("key %q holds %q", it.Val(), s)
			}
		}
		if strings.Contains(it.Val(), ":m:app:/third") {
			third++
		}
	}
	if third != 1 {
		t.Errorf("%d keys for /third;<n>/a, want 1", third)
	}
	out, code := rig.run(t, "aggregate")
	if code != 0 {
		t.Fatalf("borda aggregate exited %d:\n%s", code, out)
	}
	rows := rig.rows(t)
	t.Logf("rows: %q", rows)
	if !slices.Contains(rows, "endpoint app:/third/a 50") {
		t.Errorf("no row \"endpoint app:/third/a 50\"")
	}
	for _, r := range rows {
		for _, s := range secrets {
			if strings.Contains(r, s) {
				t.Errorf("gateway_metrics row %q holds %q", r, s)
			}
		}
	}
}

// Fresh attack pass 7 T01/T02: a Django signing.dumps link
// ("payload:timestamp:signature", django-allauth's e-mail confirmation
// keys) and hex secrets beside RFC 3986 sub-delims or an emoji were Redis
// keys and gateway_metrics rows verbatim. A secret beside any character
// is {id}.
func TestHostileSecretsBesideSubDelimsNeverBecomeKeys(t *testing.T) {
	up := recordingUpstream(t)
	rig := newTelemetryRig(t, up.URL)
	p := startServe(t, rig.serveWithoutDatabase())
	secrets := []string{"Xk3v9Yc2bQpLrT8mZ1nW4aEhG6uJ0sOiK5dF7gH2jL0", "9f86d081884c7d659a2feaa0c55ad015"}
	paths := []string{
		"/accounts/confirm-email/MQ:1sQDFd:" + secrets[0] + "/",
		"/reset/tok:" + secrets[1],
		"/reset/(" + secrets[1] + ")",
		"/reset/%F0%9F%94%91" + secrets[1],
	}
	for _, path := range paths {
		resp := get(t, p.public+path, "")
		resp.Body.Close()
	}
	rig.waitForCounter(t, "m:app:/accounts/confirm-email/{id}/:*", 1)
	rig.waitForCounter(t, "m:app:/reset/{id}:*", 3)
	it := rig.rdb.Scan(t.Context(), 0, rig.ks.Prefix()+"*", 1000).Iterator()
	for it.Next(t.Context()) {
		for _, s := range secrets {
			if strings.Contains(it.Val(), s) {
				t.Errorf("key %q holds the secret %q", it.Val(), s)
			}
		}
	}
}
