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

// TestHostile_SameIDFromTwoSourcesReachesTheLegacyEndpointTwice (issue
// 23, item 1) tries the data loss on the real binaries: `borda serve`
// with two sources and `borda forward`, the same Idempotency-Key sent to
// both sources with different bodies. Both get 200 PUBLISHED_CONFIRMED;
// both must reach the legacy endpoint. Before, the forwarder's key had no
// source and the second was acked as a duplicate: never POSTed, never
// dead-lettered, never logged.
func TestHostile_SameIDFromTwoSourcesReachesTheLegacyEndpointTwice(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	n := newNames(t)
	t.Cleanup(func() { n.deleteTopology(t, amqpURL) })

	var mu sync.Mutex
	var bodies []string
	keys := map[string]string{} // body → the Idempotency-Key it came with
	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		keys[string(b)] = r.Header.Get("Idempotency-Key")
		mu.Unlock()
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
forward:
  queue: %q
  events_queue: ""
  dlq: %q
  retry_delays: [1s]
  url: %q
`, redisURL, n.prefix, amqpURL, n.exchange, n.routingKey, n.queue, n.dlq, legacy.URL+"/legacy")
	env := []string{"WEBHOOK_TOKENS=e2e-token", "LEGACY_WEBHOOK_HMAC_SECRET=e2e-secret"}
	srv := startServe(t, config, env...)

	path := filepath.Join(t.TempDir(), "forward.yaml")
	if err := os.WriteFile(path, []byte(strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(config)), 0o600); err != nil {
		t.Fatal(err)
	}
	startForward(t, path, env...)

	waitReady(t, srv.public+"/readyz/webhook")
	id := "msg_1-" + n.prefix
	for _, src := range []string{"whatsapp", "zapster"} {
		req, _ := http.NewRequest(http.MethodPost, srv.public+"/webhooks/"+src, strings.NewReader(`{"from":"`+src+`"}`))
		req.Header.Set("Authorization", "Bearer e2e-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "PUBLISHED_CONFIRMED") {
			t.Fatalf("POST to %s = %d %s", src, resp.StatusCode, b)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := strings.Join(bodies, " ")
		count := len(bodies)
		mu.Unlock()
		if strings.Contains(got, `{"from":"whatsapp"}`) && strings.Contains(got, `{"from":"zapster"}`) {
			if count != 2 {
				t.Errorf("legacy endpoint got %d POSTs (%s), want 2", count, got)
			}
			// A receiver that deduplicates by Idempotency-Key (as
			// docs/forwarder.md tells it to) must not drop either: the
			// flat source keeps the bare id, another source names itself.
			mu.Lock()
			wk, zk := keys[`{"from":"whatsapp"}`], keys[`{"from":"zapster"}`]
			mu.Unlock()
			// A token source's client-named id is bound to the body
			// (docs/webhooks.md §4): id "~" the first 16 hex digits of
			// printf '%s' '{"from":"whatsapp"}' | sha256sum   (3034f611416df683)
			// printf '%s' '{"from":"zapster"}' | sha256sum    (aef9d092ce160906)
			wantW, wantZ := id+"~3034f611416df683", "zapster:"+id+"~aef9d092ce160906"
			if wk != wantW || zk != wantZ {
				t.Errorf("Idempotency-Keys %q (whatsapp) and %q (zapster), want %q and %q", wk, zk, wantW, wantZ)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 30 s the legacy endpoint got only %q: an acknowledged event was dropped", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
