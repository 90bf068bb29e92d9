package e2e

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/forward"
)

// TestDLQListAndShowPrintTheReplyAndKeepTheLetter: against a DLQ of its
// own (quorum), the real binary's `dlq list` shows the legacy endpoint's
// reply excerpt, `dlq show ID` the whole entry (reasons, reply, headers,
// a body preview with the apikey redacted), an unknown id exits 1, and
// the letter is still in the DLQ afterwards.
func TestDLQListAndShowPrintTheReplyAndKeepTheLetter(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	q := servicetest.Name(t) + "-dlq"
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	servicetest.DeleteAtCleanup(t, conn, []string{q}, nil)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-2 * time.Minute)
	body, err := envelope.New("ev-show-1", "whatsapp", "application/json", nil,
		[]byte(`{"event":"messages.upsert","instance":"escola-7","apikey":"hidden-key"}`), at).Encode()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm("", q, true, false, amqp.Publishing{
		MessageId: "ev-show-1", DeliveryMode: amqp.Persistent, ContentType: envelope.ContentType, Body: body,
		Headers: amqp.Table{forward.HeaderDLQReason: "4xx", forward.HeaderFirstReason: "4xx", forward.HeaderDLQStatus: int32(422),
			forward.HeaderDLQExcerpt: `{"erro":"instância desconhecida"}`, forward.HeaderAttempt: int32(1),
			forward.HeaderDeadLetteredAt: at.Format(time.RFC3339Nano), forward.HeaderSource: "whatsapp"},
	})
	if err != nil || !dc.Wait() {
		t.Fatalf("publishing: %v", err)
	}
	path := secretsWriteConfig(t, "environment: development\namqp: {url: \""+amqpURL+"\"}\nforward: {dlq: "+q+"}\n")
	env := cleanEnv()

	out, code := secretsRun(t, env, "dlq", "list", "--config", path)
	if code != 0 || !strings.Contains(out, "REPLY EXCERPT") || !strings.Contains(out, `{"erro":"instância desconhecida"}`) {
		t.Errorf("dlq list: exit %d:\n%s", code, out)
	}
	out, code = secretsRun(t, env, "dlq", "show", "ev-show-1", "--config", path)
	for _, want := range []string{"id:                    ev-show-1", "reason:                4xx", "last status:           422",
		`reply excerpt:         {"erro":"instância desconhecida"}`, "x-borda-dlq-excerpt:", `"instance":"escola-7"`, `"apikey":"[redacted]"`} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq show lacks %q:\n%s", want, out)
		}
	}
	if code != 0 || strings.Contains(out, "hidden-key") {
		t.Errorf("dlq show: exit %d (want 0), or the apikey shown:\n%s", code, out)
	}
	if out, code = secretsRun(t, env, "dlq", "show", "--config", path, "ev-none"); code != 1 || !strings.Contains(out, "no dead letter ev-none") {
		t.Errorf("dlq show of an unknown id: exit %d (want 1):\n%s", code, out)
	}
	if out, code = secretsRun(t, env, "dlq", "show", "--config", path); code != 2 {
		t.Errorf("dlq show without an id: exit %d (want 2):\n%s", code, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		qi, err := ch.QueueDeclarePassive(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		if err == nil && qi.Messages == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DLQ depth after list and show: %+v, %v; want the letter kept", qi, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDLQListSaysHowManyAreInTheQueueAndHowManyAreShown: with two letters
// in the DLQ, `dlq list --limit 1` used to print "1 dead letter(s)" and
// `--limit 0` "0 dead letter(s)"; each now says the queue's depth and how
// many rows it shows, and the letters stay.
func TestDLQListSaysHowManyAreInTheQueueAndHowManyAreShown(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	q := servicetest.Name(t) + "-dlq"
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	servicetest.DeleteAtCleanup(t, conn, []string{q}, nil)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	for _, id := range []string{"ev-count-1", "ev-count-2"} {
		body, err := envelope.New(id, "whatsapp", "application/json", nil, []byte(`{"event":"x"}`), at).Encode()
		if err != nil {
			t.Fatal(err)
		}
		dc, err := ch.PublishWithDeferredConfirm("", q, true, false, amqp.Publishing{
			MessageId: id, DeliveryMode: amqp.Persistent, ContentType: envelope.ContentType, Body: body,
			Headers: amqp.Table{forward.HeaderDLQReason: "4xx", forward.HeaderDeadLetteredAt: at.Format(time.RFC3339Nano)},
		})
		if err != nil || !dc.Wait() {
			t.Fatalf("publishing: %v", err)
		}
	}
	path := secretsWriteConfig(t, "environment: development\namqp: {url: \""+amqpURL+"\"}\nforward: {dlq: "+q+"}\n")
	for _, tc := range []struct {
		args []string
		want string
		rows int
	}{
		{[]string{"--limit", "1"}, "2 dead letter(s) in " + q + ", 1 shown (--limit 1)\n", 1},
		{[]string{"--limit", "0"}, "2 dead letter(s) in " + q + ", none shown (--limit 0)\n", 0},
		{nil, "2 dead letter(s) in " + q + "\n", 2},
	} {
		out, code := secretsRun(t, cleanEnv(), append([]string{"dlq", "list", "--config", path}, tc.args...)...)
		if code != 0 || !strings.Contains(out, tc.want) || strings.Count(out, "ev-count-") != tc.rows {
			t.Errorf("dlq list %v: exit %d, want %q and %d row(s):\n%s", tc.args, code, tc.want, tc.rows, out)
		}
	}
	if out, code := secretsRun(t, cleanEnv(), "dlq", "list", "--config", path, "--limit", "-1"); code != 2 {
		t.Errorf("dlq list --limit -1: exit %d, want 2:\n%s", code, out)
	}
}
