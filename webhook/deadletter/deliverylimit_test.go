package deadletter

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/forward"
)

// TestList_TwentyFiveListingsUnderADeliveryLimitLoseNothing: `dlq list`
// used to return what it read with basic.nack (requeue), one delivery per
// listing; the DLQ has no dead-letter target, so under RabbitMQ 4's
// default delivery limit of 20 every dead letter vanished around the 20th
// listing. Twenty-five listings and twenty-five replays that select
// nothing leave every letter in place with its identity and history; a
// replay then moves exactly the chosen one, same id and body, audited.
func TestList_TwentyFiveListingsUnderADeliveryLimitLoseNothing(t *testing.T) {
	node := servicetest.PrivateBroker(t) // the policy is node-wide state
	amqpURL := servicetest.AMQPURL(t)
	pub := newRepublisher(t, amqpURL)
	pool := testPool(t)
	name := servicetest.Name(t)
	dlq, fwd := name+"-dlq", name+"-fwd"
	conn, ch := servicetest.AMQPChannel(t, amqpURL)
	for _, q := range []string{dlq, fwd} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
	}
	servicetest.DeleteAtCleanup(t, conn, []string{dlq, fwd}, nil)
	servicetest.DeliveryLimitPolicy(t, node, name, 20)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const n = 5
	at := time.Now().UTC().Add(-time.Hour)
	for i := range n {
		dc, err := ch.PublishWithDeferredConfirm("", dlq, true, false, amqp.Publishing{
			MessageId: fmt.Sprintf("%s-%d", name, i), DeliveryMode: amqp.Persistent, Body: fmt.Appendf(nil, `{"i":%d}`, i),
			Headers: amqp.Table{
				forward.HeaderDeadLetteredAt: at.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano),
				forward.HeaderDLQReason:      "retries exhausted", forward.HeaderFirstReason: "5xx (HTTP 503)",
				forward.HeaderAttempt: int64(5), forward.HeaderDLQStatus: int64(503), forward.HeaderSource: "evolution",
			},
		})
		if err != nil || !dc.Wait() {
			t.Fatalf("publishing %d: %v", i, err)
		}
	}
	ctx := context.Background()
	t.Cleanup(func() {
		pool.Exec(context.Background(), `DELETE FROM webhook_replays WHERE event_id LIKE $1`, name+"%")
	})
	for run := range 25 {
		letters, err := List(ctx, conn, pub, dlq, 0)
		if err != nil {
			t.Fatalf("list %d: %v", run+1, err)
		}
		if len(letters) != n {
			t.Fatalf("list %d shows %d dead letters, want %d", run+1, len(letters), n)
		}
		for i, l := range letters {
			if l.ID != fmt.Sprintf("%s-%d", name, i) || l.Attempts != 5 || l.Status != 503 || l.Reason != "retries exhausted" ||
				l.FirstReason != "5xx (HTTP 503)" || l.Source != "evolution" {
				t.Fatalf("list %d, letter %d = %+v", run+1, i, l)
			}
		}
		out, err := Replay(ctx, conn, pub, pool, ReplayOptions{DLQ: dlq, ForwardQueue: fwd,
			Select: Selection{ID: "no-such-event"}, Operator: "ana", Reason: "looking"})
		if err != nil || len(out) != 0 {
			t.Fatalf("replay %d of nothing = %+v, %v", run+1, out, err)
		}
	}
	waitDepth(t, ch, dlq, n)

	chosen := fmt.Sprintf("%s-%d", name, 3)
	out, err := Replay(ctx, conn, pub, pool, ReplayOptions{DLQ: dlq, ForwardQueue: fwd,
		Select: Selection{ID: chosen}, Operator: "ana", Reason: "legacy fixed (INC-42)"})
	if err != nil || len(out) != 1 || out[0].Outcome != OutcomeRepublished {
		t.Fatalf("Replay = %+v, %v", out, err)
	}
	waitDepth(t, ch, dlq, n-1)
	waitDepth(t, ch, fwd, 1)
	d, ok, err := ch.Get(fwd, true)
	if err != nil || !ok {
		t.Fatalf("reading the replay: %v, %v", ok, err)
	}
	if d.MessageId != chosen || string(d.Body) != `{"i":3}` || forward.StringHeader(d.Headers, forward.HeaderReplay) != fmt.Sprint(out[0].AuditID) {
		t.Errorf("replayed message id %q body %s headers %v", d.MessageId, d.Body, d.Headers)
	}
	var operator, reason, outcome string
	if err := pool.QueryRow(ctx, `SELECT operator, reason, outcome FROM webhook_replays WHERE id = $1`, out[0].AuditID).
		Scan(&operator, &reason, &outcome); err != nil || operator != "ana" || reason != "legacy fixed (INC-42)" || outcome != OutcomeRepublished {
		t.Errorf("audit row: %q %q %q, %v", operator, reason, outcome, err)
	}
	left, err := List(ctx, conn, pub, dlq, 0)
	if err != nil || len(left) != n-1 {
		t.Fatalf("after the replay List = %d letters, %v; want %d", len(left), err, n-1)
	}
}
