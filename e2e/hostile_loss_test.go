package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
)

// lossRig is `borda serve` (and, when started, `borda forward`) on a
// vhost of the test's own, with a legacy endpoint that records the event
// ids it receives. serve and forward connect as the vhost's own user
// (whose permissions the test changes, as the attack did: forward's own
// 5 s redeclare must not put the binding back for serve); the test's
// admin connection as the full one.
type lossRig struct {
	v      *servicetest.Vhost
	admin  *amqp.Connection
	srv    *process
	config string // forward's config
	env    []string

	mu  sync.Mutex
	ids []string // event ids POSTed to the legacy endpoint
}

const lossRoutingKey = "yzex.events.connect.whatsapp.legacy_forward"

func newLossRig(t *testing.T) *lossRig {
	t.Helper()
	r := &lossRig{v: servicetest.NewVhost(t), env: []string{"WEBHOOK_TOKENS=e2e-token", "LEGACY_WEBHOOK_HMAC_SECRET=e2e-secret"}}
	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var ev struct {
			Data struct {
				Key struct {
					ID string `json:"id"`
				} `json:"key"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &ev)
		r.mu.Lock()
		r.ids = append(r.ids, ev.Data.Key.ID)
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(legacy.Close)
	admin, err := amqp.Dial(r.v.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	r.admin = admin
	cfg := func(amqpURL string) string {
		return fmt.Sprintf(`environment: development
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
forward:
  retry_delays: [1s]
  url: %q
`, servicetest.RedisURL(t), servicetest.KeyPrefix(t), amqpURL, legacy.URL+"/legacy")
	}
	r.srv = startServe(t, cfg(r.v.UserURL), r.env...)
	path := filepath.Join(t.TempDir(), "forward.yaml")
	if err := os.WriteFile(path, []byte(strings.NewReplacer("{LISTEN}", freePort(t), "{ADMIN}", freePort(t)).Replace(cfg(r.v.UserURL))), 0o600); err != nil {
		t.Fatal(err)
	}
	r.config = path
	waitReady(t, r.srv.public+"/readyz/webhook")
	return r
}

// post sends one Evolution-shaped event with id and returns the status
// code and the body.
func (r *lossRig) post(t *testing.T, id string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.srv.public+"/webhooks/whatsapp",
		strings.NewReader(`{"instance":"i1","event":"messages.upsert","data":{"key":{"id":"`+id+`"}}}`))
	req.Header.Set("Authorization", "Bearer e2e-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *lossRig) count(t *testing.T, queue string) int {
	t.Helper()
	ch, err := r.admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspecting %s: %v", queue, err)
	}
	return q.Messages
}

// delivered waits (60 s at most) until the legacy endpoint got every id
// of want, and fails naming the ones that never came.
func (r *lossRig) delivered(t *testing.T, want []string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r.mu.Lock()
		var missing []string
		for _, id := range want {
			if !slices.Contains(r.ids, id) {
				missing = append(missing, id)
			}
		}
		r.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("answered 200 PUBLISHED_CONFIRMED but never reached the legacy endpoint: %v (of %d)", missing, len(want))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *lossRig) forwardBound() bool {
	return slices.Contains(r.v.Bindings(), "yzex.events yzex-connect-whatsapp-legacy-forward-queue "+lossRoutingKey)
}

func (r *lossRig) unbind(t *testing.T) {
	t.Helper()
	ch, err := r.admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.QueueUnbind("yzex-connect-whatsapp-legacy-forward-queue", lossRoutingKey, "yzex.events", nil); err != nil {
		t.Fatal(err)
	}
}

// TestHostileWebhookMaxLengthPolicyIsAnswered503NotDropped (attack A25):
// a platform team's max-length policy (2) on the forward queue, the DLQ
// and the events queue of the default topology, no forwarder running.
// Before: five 200 PUBLISHED_CONFIRMED; the forward queue kept 2, the DLQ
// 2 (dropped at the head as "maxlen"), one event gone for good. Now: a
// publish past the limit is nacked and answered 503 NACK (the provider
// retries); every 200 is in the forward queue, the DLQ holds nothing, and
// once `borda forward` runs every 200 reaches the legacy endpoint.
func TestHostileWebhookMaxLengthPolicyIsAnswered503NotDropped(t *testing.T) {
	r := newLossRig(t)
	r.v.SetPolicy("cap", "^yzex-connect-whatsapp-(legacy-forward-queue|legacy-forward-dlq|events-queue)$", `{"max-length":2}`)
	var accepted []string
	refused := 0
	for i := range 6 {
		id := "capA" + strconv.Itoa(i)
		code, body := r.post(t, id)
		switch {
		case code == 200 && strings.Contains(body, "PUBLISHED_CONFIRMED"):
			accepted = append(accepted, id)
		case code == 503 && strings.Contains(body, "NACK"):
			refused++
		default:
			t.Fatalf("event %s: %d %s", id, code, body)
		}
	}
	if refused == 0 {
		t.Fatalf("6 × 200 under a max-length policy of 2: the queues drop their oldest confirmed events (no x-overflow: reject-publish)")
	}
	if n := r.count(t, "yzex-connect-whatsapp-legacy-forward-queue"); n != len(accepted) {
		t.Errorf("forward queue holds %d events, %d were answered 200", n, len(accepted))
	}
	if n := r.count(t, "yzex-connect-whatsapp-legacy-forward-dlq"); n != 0 {
		t.Errorf("DLQ holds %d: confirmed events were dead-lettered for the queue's length", n)
	}
	startForward(t, r.config, r.env...)
	r.delivered(t, accepted)
}

// TestHostileWebhookQueuesOfThePreviousReleaseKeepWorking: the forward
// queue, the DLQ and the events queue exist as an earlier release declared
// them (no x-overflow). The new binary cannot redeclare them with the new
// arguments (PRECONDITION_FAILED); it keeps them, answers 200 as before,
// and says so: /readyz/webhook is 200 "degraded", the admin /readyz names
// the queues under "warnings", and the log points at docs/upgrading.md.
func TestHostileWebhookQueuesOfThePreviousReleaseKeepWorking(t *testing.T) {
	v := servicetest.NewVhost(t)
	conn, err := amqp.Dial(v.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q := amqp.Table{"x-queue-type": "quorum"}
	for name, args := range map[string]amqp.Table{
		"yzex-connect-whatsapp-legacy-forward-queue": {"x-queue-type": "quorum", "x-dead-letter-exchange": "yzex.events.dlx", "x-dead-letter-routing-key": "yzex-connect-whatsapp-legacy-forward-dlq"},
		"yzex-connect-whatsapp-legacy-forward-dlq":   q,
		"yzex-connect-whatsapp-events-queue":         q,
	} {
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServe(t, fmt.Sprintf(`environment: development
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
`, servicetest.RedisURL(t), servicetest.KeyPrefix(t), v.URL), "WEBHOOK_TOKENS=e2e-token")
	waitReady(t, srv.public+"/readyz/webhook")
	resp := get(t, srv.public+"/readyz/webhook", "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"webhook":"degraded"`) {
		t.Errorf("/readyz/webhook = %s, want the component degraded", b)
	}
	resp = get(t, srv.admin+"/readyz", "")
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "yzex-connect-whatsapp-legacy-forward-queue, yzex-connect-whatsapp-events-queue, yzex-connect-whatsapp-legacy-forward-dlq") {
		t.Errorf("admin /readyz = %d %s, want 200 naming the three queues", resp.StatusCode, b)
	}
	// the log is written asynchronously (logsink)
	eventually(t, 10*time.Second, "the log pointing at the migration", func() bool {
		return strings.Contains(srv.logs.String(), "docs/upgrading.md")
	})
	rig := &lossRig{srv: srv}
	if code, body := rig.post(t, "old-1"); code != 200 {
		t.Errorf("webhook over the previous release's queues = %d %s", code, body)
	}
}

// TestHostileWebhookUnboundForwardQueueWithoutConfigurePermission (attack
// A48, repro 2): serve's broker user has no configure permission (its 5 s
// topology redeclare is refused), and the forward queue's binding is
// removed by hand while the events queue's `…whatsapp.#` binding still
// routes every event. Before: 20 × 200 PUBLISHED_CONFIRMED, 0 delivered,
// /readyz/webhook 200, for as long as the binding was missing. Now the
// publisher asserts the binding every second (queue.bind needs no
// configure permission): it is back within the bound and every event
// after it reaches the legacy endpoint; the refused redeclare shows as a
// warning on /readyz.
func TestHostileWebhookUnboundForwardQueueWithoutConfigurePermission(t *testing.T) {
	r := newLossRig(t)
	startForward(t, r.config, r.env...).waitReady(t)
	r.v.SetPermissions("^$", ".*", ".*")
	r.unbind(t)
	eventually(t, 10*time.Second, "the forward binding back without the configure permission", r.forwardBound)
	var accepted []string
	for i := range 20 {
		id := "u4-" + strconv.Itoa(i)
		code, body := r.post(t, id)
		if code != 200 {
			t.Fatalf("event %s: %d %s", id, code, body)
		}
		accepted = append(accepted, id)
	}
	r.delivered(t, accepted)
}

// TestHostileWebhookUnboundForwardQueueThatCannotBeReboundIs503 (attack
// A48, least privilege): serve's user may neither declare nor bind (no
// read permission on the exchange), and the binding is removed. The
// ingress cannot know the event would reach the forward queue: it answers
// 503 FORWARD_UNBOUND (the provider retries) and /readyz/webhook is 503,
// instead of 200 for events only the events queue takes. Once the
// permission is back the binding is asserted, /readyz/webhook is 200
// again and the events are delivered.
func TestHostileWebhookUnboundForwardQueueThatCannotBeReboundIs503(t *testing.T) {
	r := newLossRig(t)
	startForward(t, r.config, r.env...).waitReady(t)
	r.v.SetPermissions("^$", ".*", "^$")
	r.unbind(t)
	var accepted []string
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		id := "ub-" + strconv.Itoa(i)
		code, body := r.post(t, id)
		if code == 503 && strings.Contains(body, "FORWARD_UNBOUND") {
			break
		}
		if code != 200 {
			t.Fatalf("event %s: %d %s", id, code, body)
		}
		// The bound: the check runs every second; until it has run,
		// an event may still go to the events queue alone.
		if time.Now().After(deadline) {
			t.Fatalf("still 200 for %s after the binding was removed and cannot be restored", time.Since(deadline.Add(-10*time.Second)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp := get(t, r.srv.public+"/readyz/webhook", "")
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("/readyz/webhook = %d while the binding cannot be asserted, want 503", resp.StatusCode)
	}
	r.v.SetPermissions(".*", ".*", ".*")
	waitReady(t, r.srv.public+"/readyz/webhook")
	for i := range 5 {
		id := "ub-after-" + strconv.Itoa(i)
		if code, body := r.post(t, id); code != 200 {
			t.Fatalf("event %s once the permission is back: %d %s", id, code, body)
		}
		accepted = append(accepted, id)
	}
	r.delivered(t, accepted)
}
