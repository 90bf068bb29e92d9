package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
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
	amqpURL := servicetest.AMQPURL(t)
	name := servicetest.Name(t)
	dlq := name + "-dlq"
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(dlq, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := conn.Channel(); err == nil {
			c.QueueDelete(dlq, false, false, false)
		}
	})
	servicetest.DeliveryLimitPolicy(t, name, 20)
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
