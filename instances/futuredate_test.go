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
// 9999-12-31 (or an hour ahead, attack A57) is ordered at the clock, so
// the next real event (dated after that) replaces it; before the fix it
// was stored as 9999 and every later event was skipped for ever, and with
// a 5-minute allowance a forged event re-sent every few minutes outranked
// every genuine one. The clock is injected.
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
	if s := readState(t, pool, instance); s.state != "close" || !s.eventTime.Equal(now) {
		t.Fatalf("stored %+v, want close ordered at %s", s, now)
	}
	now = now.Add(time.Hour) // the real event comes later: 06:40:35 > 06:05
	if r := handle(open); r != Applied {
		t.Fatalf("the real event after the forged one: %s, want applied", r)
	}
	if s := readState(t, pool, instance); s.state != "open" {
		t.Fatalf("stored %+v, want open", s)
	}
	// A57: forged events dated 1 s, 1 min and 1 h ahead, each followed a
	// second later by a genuine one dated at its own clock: the genuine
	// one wins every time.
	for _, ahead := range []time.Duration{time.Second, time.Minute, time.Hour} {
		now = now.Add(time.Minute)
		f := strings.Replace(open, "2026-01-01T06:40:35.780Z", now.Add(ahead).Format("2006-01-02T15:04:05.000Z"), 1)
		f = strings.Replace(f, `"state":"open"`, `"state":"close"`, 1)
		if r := handle(f); r != Applied {
			t.Fatalf("forged %s ahead: %s", ahead, r)
		}
		now = now.Add(time.Second)
		g := strings.Replace(open, "2026-01-01T06:40:35.780Z", now.Format("2006-01-02T15:04:05.000Z"), 1)
		if r := handle(g); r != Applied {
			t.Fatalf("genuine event after one forged %s ahead: %s, want applied", ahead, r)
		}
		if s := readState(t, pool, instance); s.state != "open" {
			t.Fatalf("after one forged %s ahead: stored %+v, want open", ahead, s)
		}
	}
	// An event dated in the past keeps its own time.
	now = now.Add(time.Minute)
	past := now.Add(-time.Second).Truncate(time.Millisecond)
	if r := handle(strings.Replace(open, "2026-01-01T06:40:35.780Z", past.Format("2006-01-02T15:04:05.000Z"), 1)); r != Applied {
		t.Fatalf("event dated a second ago: %s", r)
	}
	if s := readState(t, pool, instance); !s.eventTime.Equal(past) {
		t.Fatalf("stored %+v, want its own time %s", s, past)
	}
}
