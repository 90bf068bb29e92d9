package instances

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/envelope"
)

// TestConsumer_FarFutureDateDoesNotPinState: a connection.update dated
// 9999-12-31 pinned the state for ever; then, ordered at the clock + 5
// minutes, a forged one dated ahead still outranked every genuine event
// of the next 5 minutes, renewable at will by any token holder (fresh
// attack pass A57). An event dated after its receipt is ordered at its
// receipt (the envelope's received_at): the next genuine event wins.
// Clocks are injected (received_at, Options.Clock).
func TestConsumer_FarFutureDateDoesNotPinState(t *testing.T) {
	pool := testPool(t)
	instance := servicetest.Name(t) + "-inst"
	t.Cleanup(func() {
		pool.Exec(context.Background(), `DELETE FROM whatsapp_instances WHERE instance = $1`, instance)
	})
	now := time.Date(2026, 1, 1, 6, 40, 36, 0, time.UTC) // the genuine payload is dated 06:40:35.780
	c, err := New(Options{AMQPURL: "amqp://unused", Queue: "unused", DB: pool, Prefetch: 1, Clock: clock.Func(func() time.Time { return now.Add(time.Hour) })})
	if err != nil {
		t.Fatal(err)
	}
	handle := func(body string, receivedAt time.Time) Result {
		t.Helper()
		b, _ := envelope.New("e", "evolution", "application/json", nil, []byte(body), receivedAt).Encode()
		r, err := c.Handle(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	open := string(payload(t, "evolution-v2-connection-update-2-open.json", instance))
	at := func(date, state string) string {
		e := strings.Replace(open, "2026-01-01T06:40:35.780Z", date, 1)
		return strings.Replace(e, `"state":"open"`, `"state":"`+state+`"`, 1)
	}
	// genuine open, then a forged close dated far ahead (and one dated an
	// hour ahead, then 4 minutes ahead), each followed by a genuine open
	// dated a minute after the forgery's receipt.
	received := now
	for i, forgedDate := range []string{"9999-12-31T23:59:59Z", "2026-01-01T07:50:00Z", "2026-01-01T06:49:00Z"} {
		received = received.Add(time.Second)
		if r := handle(at(received.Format(time.RFC3339Nano), "open"), received); r != Applied {
			t.Fatalf("round %d: genuine event: %s", i, r)
		}
		received = received.Add(time.Second)
		if r := handle(at(forgedDate, "close"), received); r != Applied {
			t.Fatalf("round %d: forged event: %s", i, r)
		}
		if s := readState(t, pool, instance); s.state != "close" || !s.eventTime.Equal(received) {
			t.Fatalf("round %d: stored %+v, want close ordered at its receipt %s", i, s, received)
		}
		received = received.Add(time.Minute)
		if r := handle(at(received.Format(time.RFC3339Nano), "open"), received); r != Applied {
			t.Fatalf("round %d: the genuine event a minute after the forged one: %s, want applied", i, r)
		}
		if s := readState(t, pool, instance); s.state != "open" {
			t.Fatalf("round %d: stored %+v, want open", i, s)
		}
	}
	// An event dated before its receipt keeps its own time, and one
	// received late but dated earlier than the stored state is stale.
	own := received.Add(time.Minute)
	if r := handle(at(own.Format(time.RFC3339Nano), "connecting"), own.Add(30*time.Second)); r != Applied {
		t.Fatalf("past-dated event: %s", r)
	}
	if s := readState(t, pool, instance); !s.eventTime.Equal(own) {
		t.Fatalf("stored %+v, want its own time %s", s, own)
	}
	if r := handle(at(own.Add(-time.Second).Format(time.RFC3339Nano), "close"), own.Add(time.Hour)); r != Skipped {
		t.Fatalf("an older event received late: %s, want skipped", r)
	}
}
