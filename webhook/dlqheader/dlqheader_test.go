package dlqheader

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The header names are a contract with the messages already in the
// queues (a dead letter written by an earlier version is still listed and
// replayed): pinned to their literal spelling.
func TestHeaderNamesArePinned(t *testing.T) {
	t.Parallel()
	for got, want := range map[string]string{
		Attempt: "x-borda-attempt", FirstFailure: "x-borda-first-failure", FirstReason: "x-borda-first-reason",
		DLQReason: "x-borda-dlq-reason", DLQStatus: "x-borda-dlq-status", DLQExcerpt: "x-borda-dlq-excerpt",
		DeadLetteredAt: "x-borda-dead-lettered-at", Source: "x-borda-source", Replay: "x-borda-replay",
		ReplayForce: "x-borda-replay-force", DeliveryCount: "x-delivery-count",
	} {
		if got != want {
			t.Errorf("header %q, want %q", got, want)
		}
	}
}

// Int reads every AMQP integer type and a decimal string; anything else
// is 0. String reads strings and bytes; Time an RFC 3339 value; Bool true.
func TestReaders(t *testing.T) {
	t.Parallel()
	for _, v := range []any{int64(7), int32(7), int16(7), int8(7), 7, uint8(7), uint16(7), uint32(7), "7"} {
		if got := Int(amqp.Table{"n": v}, "n"); got != 7 {
			t.Errorf("Int(%T 7) = %d", v, got)
		}
	}
	for _, v := range []any{nil, 7.0, "x", true} {
		if got := Int(amqp.Table{"n": v}, "n"); got != 0 {
			t.Errorf("Int(%T %v) = %d, want 0", v, v, got)
		}
	}
	if String(amqp.Table{"s": "a"}, "s") != "a" || String(amqp.Table{"s": []byte("b")}, "s") != "b" || String(amqp.Table{"s": 1}, "s") != "" {
		t.Error("String reads strings and bytes only")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	if got := Time(amqp.Table{"t": at.Format(time.RFC3339Nano)}, "t"); !got.Equal(at) {
		t.Errorf("Time = %v, want %v", got, at)
	}
	if !Time(amqp.Table{"t": "yesterday"}, "t").IsZero() {
		t.Error("Time of a malformed value is not zero")
	}
	if !Bool(amqp.Table{"b": true}, "b") || Bool(amqp.Table{"b": "true"}, "b") || Bool(amqp.Table{}, "b") {
		t.Error("Bool reads a boolean true only")
	}
}

// A republish copy keeps the event (body, id, type, headers) but not the
// broker's delivery count, and its headers are its own.
func TestRepublishingKeepsTheEventAndDropsTheDeliveryCount(t *testing.T) {
	t.Parallel()
	d := amqp.Delivery{
		Headers:     amqp.Table{Attempt: int64(2), DeliveryCount: int64(5)},
		ContentType: "application/json", ContentEncoding: "gzip", MessageId: "ev-1",
		Timestamp: time.Unix(1, 0), Type: "t", AppId: "a", Body: []byte("{}"), DeliveryMode: amqp.Transient,
	}
	p := Republishing(d)
	if _, ok := p.Headers[DeliveryCount]; ok {
		t.Error("x-delivery-count copied")
	}
	if Int(p.Headers, Attempt) != 2 || p.MessageId != "ev-1" || p.ContentType != d.ContentType || p.ContentEncoding != "gzip" ||
		!p.Timestamp.Equal(d.Timestamp) || p.Type != "t" || p.AppId != "a" || string(p.Body) != "{}" || p.DeliveryMode != amqp.Persistent {
		t.Errorf("copy %+v of %+v", p, d)
	}
	p.Headers[Attempt] = int64(3)
	if Int(d.Headers, Attempt) != 2 {
		t.Error("the copy's headers are the delivery's")
	}
}
