package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/forward"
)

// rabbit4DLQConfig is a config for `borda dlq` on a private DLQ.
func rabbit4DLQConfig(t *testing.T, amqpURL, dlq string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "borda.yaml")
	cfg := `environment: development
redis:
  url: ""
amqp:
  url: "` + amqpURL + `"
telemetry:
  enabled: false
forward:
  dlq: "` + dlq + `"
  queue: "` + dlq + `-fwd"
routes:
  - name: app
    path_prefix: /
    upstream: "http://127.0.0.1:1"
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rabbit4Run runs the real binary with args, bounded by 60 s.
func rabbit4Run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, borda(t), args...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHostileRabbit4_DLQListEscapesMessageDataAndLosesNothingUnderADeliveryLimit:
// a dead letter queued with a hostile event id (terminal escapes, CR/LF
// forging a second row, a right-to-left override) and a hostile source
// and reason: `borda dlq list` printed them raw, so listing the DLQ let a
// webhook body clear the operator's screen or fake rows. It also returned
// what it read with basic.nack, one delivery per listing, so under RabbitMQ
// 4's default delivery limit of 20 (a policy here) the letter vanished
// around the 20th listing. Twenty-five runs of the real binary must print
// every field quoted and keep the letter.
func TestHostileRabbit4_DLQListEscapesMessageDataAndLosesNothingUnderADeliveryLimit(t *testing.T) {
	node := servicetest.PrivateBroker(t) // the policy is node-wide state
	amqpURL := servicetest.AMQPURL(t)
	name := servicetest.Name(t)
	dlq := name + "-dlq"
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	if _, err := ch.QueueDeclare(dlq, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	servicetest.DeleteAtCleanup(t, conn, []string{dlq}, nil)
	servicetest.DeliveryLimitPolicy(t, node, name, 20)
	const id = "evil\x1b[2J\x1b[31m\r\nFAKE-ROW\t9\u202e"
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm("", dlq, true, false, amqp.Publishing{
		MessageId: id, DeliveryMode: amqp.Persistent, Body: []byte(`{}`),
		Headers: amqp.Table{
			forward.HeaderDeadLetteredAt: time.Now().UTC().Format(time.RFC3339Nano),
			forward.HeaderSource:         "src\x1b]0;owned\x07",
			forward.HeaderFirstReason:    "5xx\r\n\x1b[1A",
			forward.HeaderAttempt:        int64(5),
		},
	})
	if err != nil || !dc.Wait() {
		t.Fatalf("publishing the dead letter: %v", err)
	}
	cfg := rabbit4DLQConfig(t, amqpURL, dlq)
	for run := range 25 {
		out, err := rabbit4Run(t, "dlq", "list", "--config", cfg)
		if err != nil {
			t.Fatalf("dlq list run %d: %v\n%q", run+1, err, out)
		}
		if strings.ContainsAny(out, "\x1b\r\x07\u202e") {
			t.Fatalf("dlq list run %d printed raw control characters: %q", run+1, out)
		}
		for _, want := range []string{`"evil\x1b[2J\x1b[31m\r\nFAKE-ROW\t9\u202e"`, `"src\x1b]0;owned\a"`, `"5xx\r\n\x1b[1A"`, "1 dead letter(s)"} {
			if !strings.Contains(out, want) {
				t.Fatalf("dlq list run %d: want %s in\n%s", run+1, want, out)
			}
		}
		if lines := strings.Count(out, "\n"); lines != 3 {
			t.Fatalf("dlq list run %d printed %d lines, want 3 (header, one row, total):\n%s", run+1, lines, out)
		}
	}
	q, err := ch.QueueDeclarePassive(dlq, true, false, false, false, nil)
	if err != nil || q.Messages != 1 {
		t.Fatalf("DLQ after 25 listings: %d messages (%v), want 1", q.Messages, err)
	}
}

// rabbit4Legacy is a legacy endpoint that counts 2xx answers per
// Idempotency-Key and refuses (400) the events bad() names until fixed.
type rabbit4Legacy struct {
	srv   *httptest.Server
	fixed atomic.Bool
	mu    sync.Mutex
	ok    map[string]int
}

func newRabbit4Legacy(t *testing.T, bad func(key string) bool) *rabbit4Legacy {
	l := &rabbit4Legacy{ok: map[string]int{}}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get(forward.HeaderIdempotencyKey)
		if bad(key) && !l.fixed.Load() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		l.mu.Lock()
		l.ok[key]++
		l.mu.Unlock()
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *rabbit4Legacy) delivered() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.ok))
	for k, v := range l.ok {
		out[k] = v
	}
	return out
}

func rabbit4Eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHostileRabbit4_RedisOutageListingsAndReplayUnderADeliveryLimitLoseNothing
// is issue 16 §1's acceptance run with the real binaries on a private
// topology under RabbitMQ 4's default delivery limit (a policy of 20):
// `borda forward` through a 2-minute Redis outage, 25 `borda dlq list`
// runs, then `borda dlq replay`. Every event ends delivered exactly once
// or in the DLQ, counted at each step; before the fix the outage alone
// dead-lettered the waiting events after ~20 s and the listings dropped
// the dead letters around the 20th run.
func TestHostileRabbit4_RedisOutageListingsAndReplayUnderADeliveryLimitLoseNothing(t *testing.T) {
	t.Parallel()
	node := servicetest.PrivateBroker(t) // the policy is node-wide state
	amqpURL := servicetest.AMQPURL(t)
	redisURL := servicetest.RedisURL(t)
	_, dbURL := servicetest.IsolatedDatabase(t)
	name := servicetest.Name(t)
	ru, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := servicetest.NewOutageProxy(t, ru.Host)
	ru.Host = proxy.Addr()
	bad := func(key string) bool {
		var i int
		_, err := fmt.Sscanf(key, "ev-%d", &i)
		return err == nil && i%5 == 0
	}
	legacy := newRabbit4Legacy(t, bad)

	exchange, rk := name+".events", name+".connect.whatsapp.legacy_forward"
	fwdQ, dlq, evQ := name+"-fwd", name+"-dlq", name+"-events"
	admin := freePort(t)
	cfgPath := filepath.Join(t.TempDir(), "borda.yaml")
	cfg := `environment: development
redis:
  url: "` + ru.String() + `"
  key_prefix: "` + servicetest.KeyPrefix(t) + `"
amqp:
  url: "` + amqpURL + `"
telemetry:
  enabled: false
webhook:
  exchange: "` + exchange + `"
  routing_key: "` + rk + `"
forward:
  queue: "` + fwdQ + `"
  dlq: "` + dlq + `"
  events_queue: "` + evQ + `"
  url: "` + legacy.srv.URL + `/legacy"
  retry_delays: ["1s"]
  timeout: 2s
routes:
  - name: app
    path_prefix: /
    upstream: "http://127.0.0.1:1"
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(cleanEnv(), "LEGACY_WEBHOOK_HMAC_SECRET=e2e-secret", "DATABASE_URL="+dbURL)
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, borda(t), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("borda %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("migrate", "--config", cfgPath)

	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	servicetest.DeleteAtCleanup(t, conn, []string{fwdQ, fwdQ + "-retry-1s", dlq, evQ}, []string{exchange})
	servicetest.DeliveryLimitPolicy(t, node, name, 20)

	logs := &syncBuffer{}
	fw := exec.Command(borda(t), "forward", "--config", cfgPath, "--admin", admin)
	fw.Env, fw.Stdout, fw.Stderr = env, logs, logs
	if err := fw.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- fw.Wait() }()
	t.Cleanup(func() {
		_ = fw.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = fw.Process.Kill() // only the process this test started
			<-exited
		}
		if t.Failed() {
			t.Logf("borda forward logs:\n%s", logs.String())
		}
	})
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	rabbit4Eventually(t, 30*time.Second, "borda forward ready", func() bool { c, _ := readyz(); return c == 200 })

	depth := func(q string) int {
		t.Helper()
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("inspecting %s: %v", q, err)
		}
		return st.Messages
	}
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			id := fmt.Sprintf("ev-%02d", i)
			// The flat section's source, as the ingress writes it: its
			// Idempotency-Key is the bare id the legacy stand-in reads.
			b, err := envelope.New(id, "whatsapp", "application/json", nil, fmt.Appendf(nil, `{"i":%d}`, i), time.Now()).Encode()
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.PublishWithContext(context.Background(), exchange, rk, false, false, amqp.Publishing{
				DeliveryMode: amqp.Persistent, MessageId: id, ContentType: envelope.ContentType, Body: b,
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const before, total = 10, 30
	wantBad := func(n int) int { return (n + 4) / 5 } // ev-00, ev-05, …
	publish(0, before)
	rabbit4Eventually(t, 30*time.Second, "the first events delivered or dead-lettered", func() bool {
		return len(legacy.delivered()) == before-wantBad(before) && depth(dlq) == wantBad(before)
	})

	// Two minutes without Redis.
	proxy.SetDown(true)
	publish(before, total)
	rabbit4Eventually(t, 20*time.Second, "/readyz to name Redis", func() bool {
		c, body := readyz()
		return c == 503 && strings.Contains(body, `"redis:`)
	})
	outageEnds := time.Now().Add(2 * time.Minute)
	for time.Now().Before(outageEnds) {
		if d := depth(dlq); d != wantBad(before) {
			t.Fatalf("DLQ depth %d during the Redis outage, want %d: waiting events were dead-lettered", d, wantBad(before))
		}
		time.Sleep(time.Second)
	}
	if d := depth(fwdQ); d != total-before {
		t.Errorf("forward queue depth at the end of the outage = %d, want %d", d, total-before)
	}
	proxy.SetDown(false)
	rabbit4Eventually(t, 60*time.Second, "every good event delivered and every bad one dead-lettered", func() bool {
		return len(legacy.delivered()) == total-wantBad(total) && depth(dlq) == wantBad(total)
	})

	// Twenty-five listings.
	for i := range 25 {
		out := run("dlq", "list", "--config", cfgPath)
		if !strings.Contains(out, fmt.Sprintf("%d dead letter(s)", wantBad(total))) {
			t.Fatalf("dlq list run %d:\n%s", i+1, out)
		}
	}

	// The fix, then one replay of everything.
	settledBefore := forwardSettled(t, admin)
	legacy.fixed.Store(true)
	out := run("dlq", "replay", "--config", cfgPath, "--all-since", "1h", "--operator", "ana", "--reason", "legacy fixed (INC-42)")
	if !strings.Contains(out, fmt.Sprintf("%d replayed, 0 failed", wantBad(total))) {
		t.Fatalf("dlq replay:\n%s", out)
	}
	rabbit4Eventually(t, 30*time.Second, "every event delivered", func() bool { return len(legacy.delivered()) == total })
	// Every replayed copy settled (POSTed or dropped as a duplicate), so
	// no POST is still to come when exactly-once is checked.
	rabbit4Eventually(t, 30*time.Second, "every replayed event settled", func() bool {
		return forwardSettled(t, admin)-settledBefore >= float64(wantBad(total))
	})
	for id, n := range legacy.delivered() {
		if n != 1 {
			t.Errorf("%s delivered %d times, want exactly once", id, n)
		}
	}
	if d, q := depth(dlq), depth(fwdQ); d != 0 || q != 0 {
		t.Errorf("after the replay: DLQ %d, forward queue %d; want 0, 0", d, q)
	}
	var body struct{ Status string }
	if _, b := readyz(); json.Unmarshal([]byte(b), &body) != nil || body.Status != "ok" {
		t.Errorf("/readyz at the end: %s", b)
	}
}

// forwardSettled is the number of deliveries the forwarder at admin has
// settled as POSTed or as a duplicate (borda_forward_outcomes_total).
func forwardSettled(t *testing.T, admin string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0.0
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "borda_forward_outcomes_total{") ||
			!(strings.Contains(line, `outcome="delivered"`) || strings.Contains(line, `outcome="duplicate"`)) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			n += v
		}
	}
	return n
}
