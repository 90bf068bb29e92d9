package instances

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/envelope"
)

// TestConsumer_FarFutureDateDoesNotPinState: a connection.update dated
// 9999-12-31 is ordered at the clock + MaxEventSkew, so the next real
// event (dated after that) replaces it; before the fix it was stored as
// 9999 and every later event was skipped for ever. The clock is injected.
func TestConsumer_FarFutureDateDoesNotPinState(t *testing.T) {
	pool := testPool(t)
	instance := servicetest.Name(t) + "-inst"
	t.Cleanup(func() {
		pool.Exec(context.Background(), `DELETE FROM whatsapp_instances WHERE instance = $1`, instance)
	})
	now := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
	c, err := New(Options{AMQPURL: "amqp://unused", Queue: "unused", DB: pool, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	handle := func(body string) Result {
		t.Helper()
		b, _ := envelope.New("e", "evolution", "application/json", nil, []byte(body), now).Encode()
		r, err := c.Handle(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	open := string(payload(t, "evolution-v2-connection-update-2-open.json", instance))
	forged := strings.Replace(open, "2026-01-01T06:40:35.780Z", "9999-12-31T23:59:59Z", 1)
	forged = strings.Replace(forged, `"state":"open"`, `"state":"close"`, 1)
	if r := handle(forged); r != Applied {
		t.Fatalf("forged event: %s", r)
	}
	if s := readState(t, pool, instance); s.state != "close" || !s.eventTime.Equal(now.Add(MaxEventSkew)) {
		t.Fatalf("stored %+v, want close ordered at %s", s, now.Add(MaxEventSkew))
	}
	now = now.Add(time.Hour) // the real event comes later: 06:40:35 > 06:05
	if r := handle(open); r != Applied {
		t.Fatalf("the real event after the forged one: %s, want applied", r)
	}
	if s := readState(t, pool, instance); s.state != "open" {
		t.Fatalf("stored %+v, want open", s)
	}
	// An event within the skew keeps its own time.
	near := strings.Replace(open, "2026-01-01T06:40:35.780Z", "2026-01-01T07:03:00Z", 1)
	if r := handle(near); r != Applied {
		t.Fatalf("near-future event: %s", r)
	}
	if s := readState(t, pool, instance); !s.eventTime.Equal(time.Date(2026, 1, 1, 7, 3, 0, 0, time.UTC)) {
		t.Fatalf("stored %+v, want its own time 07:03", s)
	}
}
