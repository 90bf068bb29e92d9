package forward

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
)

// ackRecorder is an amqp.Acknowledger that records what a handler did
// with its delivery.
type ackRecorder struct {
	mu                    sync.Mutex
	acks, nacks, requeues int
	ackErr                error // what Ack answers
}

func (a *ackRecorder) Ack(uint64, bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acks++
	return a.ackErr
}

func (a *ackRecorder) Nack(_ uint64, _ bool, requeue bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nacks++
	if requeue {
		a.requeues++
	}
	return nil
}

func (a *ackRecorder) Reject(_ uint64, requeue bool) error { return a.Nack(0, false, requeue) }

func (a *ackRecorder) counts() (acks, nacks, requeues int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acks, a.nacks, a.requeues
}

// TestGiveBackAcksOnlyAConfirmedCopy: a delivery given back (breaker
// open, Redis down, consumer stopping) is acked once its copy is
// confirmed at the tail of the forward queue, so no delivery of the
// queue's limit is spent; when the copy cannot be published it is nacked
// with requeue, never acked (the event would be lost) and never both. A
// failed ack is logged (the broker redelivers it: one more copy, which
// the idempotency key absorbs), a successful one is not.
func TestGiveBackAcksOnlyAConfirmedCopy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newLegacy(t, always(action{status: 200})), nil)
	f, err := New(h.options())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.pub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.pub.Stop(ctx); err != nil {
			t.Errorf("stopping the publisher: %v", err)
		}
	}
	t.Cleanup(stop)
	ready, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.pub.WaitReady(ready); err != nil {
		t.Fatal(err)
	}
	var tape servicetest.LogBuffer
	f.log = slog.New(slog.NewTextHandler(&tape, nil))
	w := &worker{f: f, pub: f.pub}
	delivery := func(id string, rec *ackRecorder) amqp.Delivery {
		return amqp.Delivery{Acknowledger: rec, MessageId: id, Body: []byte(`{}`), Headers: amqp.Table{}}
	}

	copied := &ackRecorder{}
	w.giveBack(context.Background(), delivery("gb-copied", copied))
	if a, n, _ := copied.counts(); a != 1 || n != 0 {
		t.Fatalf("a delivery whose copy was confirmed: %d acks, %d nacks; want 1 ack", a, n)
	}
	if strings.Contains(tape.String(), "level=WARN") {
		t.Errorf("a give-back that went well logged a warning:\n%s", tape.String())
	}
	ackFails := &ackRecorder{ackErr: errors.New("channel/connection is not open")}
	w.giveBack(context.Background(), delivery("gb-ack-fails", ackFails))
	if !strings.Contains(tape.String(), "acking a delivery given back") {
		t.Errorf("a failed ack of a delivery given back was not logged:\n%s", tape.String())
	}
	for _, id := range []string{"gb-copied", "gb-ack-fails"} {
		m, ok, err := h.ch.Get(h.top.ForwardQueue, true)
		if err != nil || !ok || m.MessageId != id {
			t.Fatalf("the forward queue holds %q (found %v, %v); want the copy of %s", m.MessageId, ok, err, id)
		}
	}

	stop() // the copy cannot be published now
	refused := &ackRecorder{}
	w.giveBack(context.Background(), delivery("gb-refused", refused))
	if a, n, r := refused.counts(); a != 0 || n != 1 || r != 1 {
		t.Fatalf("a delivery whose copy was refused: %d acks, %d nacks (%d with requeue); want 1 nack with requeue", a, n, r)
	}
	if _, ok, _ := h.ch.Get(h.top.ForwardQueue, true); ok {
		t.Error("a refused copy reached the forward queue")
	}
}
