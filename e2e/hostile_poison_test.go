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

// TestHostile_OneSourcesPoisonEventsDoNotPauseTheOtherSources (fresh
// attack pass 8, F01, and pass 10, A05) tries it on the real binaries: the
// holder of WEBHOOK_TOKENS, which two sources accept (whatsapp and zapster),
// sends events the legacy endpoint answers 500 to (it crashes on their
// payload), alternating between the two. They opened the forwarder's
// breaker (3 failures, open for an hour here) and a third source's
// deliveries (its own token) waited: first because any failures counted,
// then because two source names counted as two senders. Now the third
// source's events are delivered while the poison is still being retried,
// and the breaker never opens. zapster reads the same token from a variable
// of its own, and `borda forward` runs without any token variable, as the
// shipped manifest runs it (fresh attack pass 11, A06): only the ingress
// knows the two share a credential, and it says so in the envelope.
func TestHostile_OneSourcesPoisonEventsDoNotPauseTheOtherSources(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	n := newNames(t)
	t.Cleanup(func() { n.deleteTopology(t, amqpURL) })

	var mu sync.Mutex
	poisonPOSTs, good := 0, 0
	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(string(b), "boom") {
			poisonPOSTs++
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "Fatal error: Undefined index: text")
			return
		}
		good++
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(legacy.Close)

	config := fmt.Sprintf(`environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: %q
  key_prefix: %q
amqp:
  url: %q
routes:
  - name: alpha
    upstream: "http://127.0.0.1:9"
telemetry:
  enabled: false
webhook:
  path: /webhooks/whatsapp
  exchange: %q
  routing_key: %q
  sources:
    - name: zapster
      path: /webhooks/zapster
      tokens_env: ZAPSTER_TOKENS
    - name: own
      path: /webhooks/own
      tokens_env: OWN_TOKENS
forward:
  queue: %q
  events_queue: ""
  dlq: %q
  retry_delays: [1s, 2s]
  url: %q
  prefetch: 1
  breaker:
    failures: 3
    open_for: 1h
`, redisURL, n.prefix, amqpURL, n.exchange, n.routingKey, n.queue, n.dlq, legacy.URL+"/legacy")
	env := []string{"WEBHOOK_TOKENS=e2e-token", "ZAPSTER_TOKENS=e2e-token", "OWN_TOKENS=own-token", "LEGACY_WEBHOOK_HMAC_SECRET=e2e-secret"}
	srv := startServe(t, config, env...)
	path := filepath.Join(t.TempDir(), "forward.yaml")
	if err := os.WriteFile(path, []byte(strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(config)), 0o600); err != nil {
		t.Fatal(err)
	}
	fwd := startForward(t, path, "LEGACY_WEBHOOK_HMAC_SECRET=e2e-secret") // no token variable
	waitReady(t, srv.public+"/readyz/webhook")

	post := func(src, body string) {
		t.Helper()
		token := "e2e-token"
		if src == "own" {
			token = "own-token"
		}
		if status, reply := postWebhookTo(t, srv.public, src, token, []byte(body)); status != 200 {
			t.Fatalf("POST to %s = %d %s", src, status, reply)
		}
	}
	const poison, goodEvents = 6, 3
	for i := range poison {
		post([]string{"zapster", "whatsapp"}[i%2], fmt.Sprintf(`{"boom":%d}`, i))
	}
	for i := range goodEvents {
		post("own", fmt.Sprintf(`{"ok":%d}`, i))
	}
	eventually(t, 30*time.Second, "the other source's events delivered after the poison failed more often than breaker.failures", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return good == goodEvents && poisonPOSTs >= poison
	})
	if logs := fwd.logs.String(); strings.Contains(logs, "forward breaker opened") {
		t.Errorf("one source's poison events opened the breaker:\n%s", logs)
	}
}
