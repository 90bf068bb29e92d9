package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// TestHostileUnreadableManagementAPIAdmitsEventsAQueueMayDrop (fresh
// attack pass 9, W01) tries it on the real binary: `amqp.management_url`
// set, the management API answering 401 from the start (wrong
// credentials). The guard never learnt the queues' settings and admitted
// every publish: with a drop-head policy on the events queue, 5 of 8
// acknowledged events were dropped while /readyz/webhook said ready. Now
// every webhook is refused 503 QUEUE_MAY_DROP and /readyz/webhook is 503,
// naming the failure, until the API answers; then they are accepted.
func TestHostileUnreadableManagementAPIAdmitsEventsAQueueMayDrop(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	n := newNames(t)
	t.Cleanup(func() { n.deleteTopology(t, amqpURL) })

	var healthy atomic.Bool
	var reads atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		if !healthy.Load() {
			http.Error(w, `{"error":"not_authorized","reason":"Login failed"}`, http.StatusUnauthorized)
			return
		}
		// Any queue: a quorum queue refusing at its limit, no policy.
		name := r.URL.EscapedPath()[strings.LastIndexByte(r.URL.EscapedPath(), '/')+1:]
		fmt.Fprintf(w, `{"name":%q,"vhost":"/","type":"quorum","arguments":{"x-queue-type":"quorum","x-overflow":"reject-publish"},"policy":null,"operator_policy":null,"effective_policy_definition":{},"messages":0,"message_bytes":0}`, name)
	}))
	t.Cleanup(api.Close)

	config := fmt.Sprintf(`environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: ""
amqp:
  url: %q
  management_url: %q
routes:
  - name: alpha
    upstream: "http://127.0.0.1:9"
telemetry:
  enabled: false
webhook:
  path: /webhooks/whatsapp
  exchange: %q
  routing_key: %q
forward:
  queue: %q
  events_queue: ""
  dlq: %q
`, amqpURL, strings.Replace(api.URL, "http://", "http://monitor:wrong@", 1)+"/", n.exchange, n.routingKey, n.queue, n.dlq)
	srv := startServe(t, config, "WEBHOOK_TOKENS=e2e-token")

	post := func(id string) (int, string) {
		t.Helper()
		return postWebhook(t, srv.public, []byte(`{"data":{"key":{"id":"`+id+`"}}}`))
	}
	// The guard read (and failed) at least once before the checks.
	eventually(t, 10*time.Second, "the guard to ask the management API", func() bool { return reads.Load() >= 3 })
	for i := range 8 {
		if status, body := post(fmt.Sprintf("unread-%d", i)); status != 503 || !strings.Contains(body, "QUEUE_MAY_DROP") {
			t.Fatalf("webhook %d with the queues' settings never read: %d %s, want 503 QUEUE_MAY_DROP", i, status, body)
		}
	}
	resp := get(t, srv.public+"/readyz/webhook", "")
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("public /readyz/webhook = %d, want 503", resp.StatusCode)
	}
	// The admin listener's readyz names the reason.
	resp = get(t, srv.admin+"/readyz/webhook", "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "HTTP 401") || !strings.Contains(string(b), "never read") {
		t.Errorf("admin /readyz/webhook = %d %s, want 503 naming the API's 401", resp.StatusCode, b)
	}
	if logs := srv.logs.String(); strings.Contains(logs, "monitor:wrong") || strings.Contains(logs, ":wrong@") {
		t.Errorf("the management URL's password reached the log")
	}

	healthy.Store(true) // the operator fixed the credentials
	eventually(t, 15*time.Second, "a webhook accepted once the API answers", func() bool {
		status, _ := post(fmt.Sprintf("read-%d", time.Now().UnixNano()))
		return status == 200
	})
}
