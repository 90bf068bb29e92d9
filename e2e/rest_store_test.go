package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// TestTheRESTStoreAloneServesTelemetryForwardAndThePage (issue 27 item 4)
// runs the real binaries with only UPSTASH_REDIS_REST_URL and _TOKEN for
// a store (internal/upstashtest in front of the local Redis), as the
// seed's deployment holds them: two `borda serve` replicas, `borda
// forward` and `borda aggregate`. Counters reach gateway_metrics, the
// forwarder POSTs an event both replicas published once and acks the
// second copy as a duplicate, and the operator page shows the forwarder
// and its duplicate. Before, telemetry was off on REST, forward refused to
// start without REDIS_URL and the page said "unknown".
func TestTheRESTStoreAloneServesTelemetryForwardAndThePage(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	db, dbURL := servicetest.IsolatedDatabase(t)
	front, restURL := servicetest.RESTFront(t, redisURL)
	rdb := servicetest.RedisClient(t, redisURL, false) // the test's own look at the keys
	n := newNames(t)
	t.Cleanup(func() {
		n.deleteTopology(t, amqpURL)
		iter := rdb.Scan(t.Context(), 0, n.prefix+"*", 1000).Iterator()
		for iter.Next(t.Context()) {
			rdb.Del(t.Context(), iter.Val())
		}
	})

	var mu sync.Mutex
	var posts []string
	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, string(b))
		mu.Unlock()
	}))
	t.Cleanup(legacy.Close)
	app := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(app.Close)

	// The REST test server under the race-built binaries answers in more
	// than the 100 ms default read timeout when the machine is loaded
	// (servicetest.RESTReadTimeout).
	config := fmt.Sprintf(`environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  key_prefix: %q
  read_timeout: 1s
database:
  url: %q
amqp:
  url: %q
telemetry:
  enabled: true
  flush_every: 100ms
  aggregate_every: 1h
routes:
  - name: app
    path_prefix: /
    upstream: %q
webhook:
  path: /webhooks/whatsapp
  exchange: %q
  routing_key: %q
forward:
  queue: %q
  events_queue: ""
  dlq: %q
  retry_delays: [1s]
  url: %q
`, n.prefix, dbURL, amqpURL, app.URL, n.exchange, n.routingKey, n.queue, n.dlq, legacy.URL+"/legacy")
	env := []string{"UPSTASH_REDIS_REST_URL=" + restURL, "UPSTASH_REDIS_REST_TOKEN=" + servicetest.RESTToken,
		"WEBHOOK_TOKENS=e2e-token", "LEGACY_WEBHOOK_HMAC_SECRET=e2e-secret"}
	oneshot := filepath.Join(t.TempDir(), "oneshot.yaml")
	if err := os.WriteFile(oneshot, []byte(strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(config)), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, code := secretsRun(t, append(cleanEnv(), env...), append(args, "--config", oneshot)...)
		if code != 0 {
			t.Fatalf("borda %v exited %d:\n%s", args, code, out)
		}
		return out
	}
	if out := run("config", "check"); strings.Contains(out, "redis.rest_url") || strings.Contains(out, "redis.url:") {
		t.Errorf("config check warns about the REST store:\n%s", out)
	}
	run("migrate")

	// The replicas aggregate nothing themselves (no database): only the
	// one-shot does, so its report is the whole story.
	serveConfig := strings.Replace(config, fmt.Sprintf("database:\n  url: %q\n", dbURL), "", 1)
	a := startServe(t, serveConfig, env...)
	b := startServe(t, serveConfig, env...)
	for _, p := range []*process{a, b} {
		if strings.Contains(p.logs.String(), "telemetry counters off") {
			t.Fatalf("serve on the REST store turned telemetry off:\n%s", p.logs.String())
		}
	}
	startForward(t, oneshot, env...).waitReady(t)

	for i := range 5 {
		get(t, fmt.Sprintf("%s/alunos/%d", a.public, i), "").Body.Close()
	}
	// The same event through both replicas (each has its own in-process
	// dedup table): published twice, POSTed once.
	waitReady(t, a.public+"/readyz/webhook")
	waitReady(t, b.public+"/readyz/webhook")
	for _, p := range []*process{a, b} {
		req, _ := http.NewRequest(http.MethodPost, p.public+"/webhooks/whatsapp", strings.NewReader(`{"event":"rest-store"}`))
		req.Header.Set("Authorization", "Bearer e2e-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "rest-"+n.prefix)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "PUBLISHED_CONFIRMED") {
			t.Fatalf("webhook through a replica = %d %s", resp.StatusCode, body)
		}
	}
	// The page reads the forwarder's snapshot (written every 5 s) from the
	// REST store: the forwarder and its duplicate are shown.
	var page string
	eventually(t, 30*time.Second, "the operator page showing the forwarder's duplicate", func() bool {
		resp, err := http.Get(a.admin + "/ui")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page = string(b)
		return strings.Contains(page, `class="forwarder"`) && strings.Contains(page, "duplicates acked without a POST: 1")
	})
	mu.Lock()
	got := append([]string(nil), posts...)
	mu.Unlock()
	if len(got) != 1 || got[0] != `{"event":"rest-store"}` {
		t.Errorf("the legacy endpoint got %q, want the event once", got)
	}

	// Counters reach Redis through the REST store, then gateway_metrics.
	eventually(t, 10*time.Second, "the telemetry counters in Redis", func() bool {
		iter := rdb.Scan(t.Context(), 0, n.prefix+"m:app:*", 1000).Iterator()
		return iter.Next(t.Context())
	})
	if out := run("aggregate"); !strings.Contains(out, "aggregated ") || strings.Contains(out, "aggregated 0 counters") {
		t.Errorf("borda aggregate over REST: %s", out)
	}
	var rows int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM gateway_metrics WHERE kind = 'endpoint' AND dimension = 'app:/alunos/{id}' AND count >= 5`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("gateway_metrics rows of app:/alunos/{id} with 5 requests: %d (%v), want 1", rows, err)
	}
	st := front.Stats()
	t.Logf("the REST store served %v requests, %v commands", st.Requests, st.Commands)
	if st.Requests["/multi-exec"] == 0 {
		t.Errorf("no /multi-exec request: the telemetry flush did not go over REST (%v)", st.Requests)
	}
}
