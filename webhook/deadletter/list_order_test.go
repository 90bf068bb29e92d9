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

// TestList_StaysOldestFirstAfterAPartialPass: a quorum queue puts the
// messages a pass returns (basic.nack requeue) behind the others, so after
// `dlq list --limit 2` the queue is rotated; the next full list must still
// show every dead letter, oldest first, and lose none.
func TestList_StaysOldestFirstAfterAPartialPass(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	pub := newRepublisher(t, amqpURL)
	for _, qt := range []string{"quorum", "classic"} {
		t.Run(qt, func(t *testing.T) {
			conn, err := amqp.Dial(amqpURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			q := servicetest.Name(t) + "-dlq"
			if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": qt}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if c, err := conn.Channel(); err == nil {
					c.QueueDelete(q, false, false, false)
				}
			})
			if err := ch.Confirm(false); err != nil {
				t.Fatal(err)
			}
			const n = 6
			at := time.Now().UTC().Add(-time.Hour)
			for i := range n {
				dc, err := ch.PublishWithDeferredConfirm("", q, true, false, amqp.Publishing{
					MessageId: fmt.Sprint(i), DeliveryMode: amqp.Persistent, Body: []byte("{}"),
					Headers: amqp.Table{forward.HeaderDeadLetteredAt: at.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano)},
				})
				if err != nil || !dc.Wait() {
					t.Fatalf("publishing %d: %v", i, err)
				}
			}
			ctx := context.Background()
			for _, limit := range []int{2, 0, 5, 0} {
				letters, err := List(ctx, conn, pub, q, limit)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, l := range letters {
					ids = append(ids, l.ID)
				}
				if limit != 0 {
					if len(letters) != limit {
						t.Fatalf("List(limit %d) = %v", limit, ids)
					}
					continue
				}
				if fmt.Sprint(ids) != "[0 1 2 3 4 5]" {
					t.Fatalf("List after a partial pass = %v, want every letter oldest first", ids)
				}
			}
			waitDepth(t, ch, q, n)
		})
	}
}
