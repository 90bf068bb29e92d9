package publish

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// setDeclared is what Degraded, borda_webhook_topology_declare_failed and
// the operator's log know about the last topology declare. Each change is
// logged once: queues kept with an earlier release's arguments when the
// set changes to a non-empty one, "declared again" when a failure ends;
// a repeat logs nothing.
func TestSetDeclaredLogsEachChangeOnceAndSetsTheGauge(t *testing.T) {
	tape := &logTape{}
	p, err := New(Options{URL: "amqp://127.0.0.1:1/", ConfirmTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(tape, nil))})
	if err != nil {
		t.Fatal(err)
	}
	kept := func() int { return strings.Count(tape.String(), "queues kept with an earlier release's arguments") }
	again := func() int { return strings.Count(tape.String(), "webhook topology declared again") }
	failed := func() float64 { return value(t, p.metrics.declareFailed) }

	steps := []struct {
		name      string
		unguarded []string
		err       error
		ok        bool
		kept      int // "queues kept" lines so far
		again     int // "declared again" lines so far
		failed    float64
	}{
		{"a clean first declare", nil, nil, true, 0, 0, 0},
		{"two queues kept", []string{"a", "b"}, nil, true, 1, 0, 0},
		{"the same two again", []string{"a", "b"}, nil, true, 1, 0, 0},
		{"one of them migrated", []string{"b"}, nil, true, 2, 0, 0},
		{"the broker refuses", nil, errors.New("ACCESS_REFUSED"), false, 2, 0, 1},
		{"it refuses again", nil, errors.New("ACCESS_REFUSED"), false, 2, 0, 1},
		{"declared again", []string{"b"}, nil, true, 2, 1, 0},
		{"declared once more", []string{"b"}, nil, true, 2, 1, 0},
		{"every queue migrated", nil, nil, true, 2, 1, 0},
	}
	for _, s := range steps {
		p.setDeclared(s.unguarded, s.err, s.ok)
		if got := kept(); got != s.kept {
			t.Errorf("%s: %d 'queues kept' lines, want %d; log:\n%s", s.name, got, s.kept, tape)
		}
		if got := again(); got != s.again {
			t.Errorf("%s: %d 'declared again' lines, want %d; log:\n%s", s.name, got, s.again, tape)
		}
		if got := failed(); got != s.failed {
			t.Errorf("%s: borda_webhook_topology_declare_failed = %v, want %v", s.name, got, s.failed)
		}
	}
	if got := p.unguardedCount(); got != 0 {
		t.Errorf("unguarded queues after every one migrated = %v, want 0", got)
	}
}

// connection.blocked and connection.unblocked each change the state once:
// blocked closes the signal publishes wait on and sets
// borda_webhook_broker_blocked; a repeat changes nothing (no second close
// of the signal); unblocked gives a fresh, open signal.
func TestSetBlockedChangesTheStateOncePerTransition(t *testing.T) {
	p, err := New(Options{URL: "amqp://127.0.0.1:1/", ConfirmTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	isClosed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	for i, step := range []bool{true, true, false, false, true} {
		p.setBlocked(step)
		if got := isClosed(p.blockedSignal()); got != step {
			t.Errorf("step %d (blocked %v): signal closed = %v", i, step, got)
		}
		if got := value(t, p.metrics.blocked); got != boolGauge(step) {
			t.Errorf("step %d (blocked %v): borda_webhook_broker_blocked = %v", i, step, got)
		}
		if p.blocked.Load() != step {
			t.Errorf("step %d: blocked = %v", i, p.blocked.Load())
		}
	}
}

// Stop whose ctx ends while confirms are outstanding says so, with the
// number of them, even though the reconnect loop then stops cleanly.
func TestStopReportsConfirmsStillOutstandingAtItsDeadline(t *testing.T) {
	p, err := New(Options{URL: "amqp://127.0.0.1:1/", ConfirmTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p.slots <- struct{}{} // one publish awaiting its confirm
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = p.Stop(ctx)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "draining 1 outstanding confirms") {
		t.Errorf("Stop with a confirm outstanding and its ctx over = %v, want the drain's error", err)
	}
}

// New's defaults: an empty connection name becomes
// "borda-webhook-publisher/<host>/<pid>" (what rabbitmqctl
// list_connections shows), a given one is kept; a queue is checked only
// when Options.CheckQueue names one.
func TestNewDefaultsTheConnectionNameAndChecksOnlyANamedQueue(t *testing.T) {
	p, err := New(Options{URL: "amqp://127.0.0.1:1/", ConfirmTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.connName, "borda-webhook-publisher/") || !strings.HasSuffix(p.connName, "/"+strconv.Itoa(os.Getpid())) {
		t.Errorf("default connection name = %q", p.connName)
	}
	if p.qcheck != nil {
		t.Error("a queue is checked with no CheckQueue")
	}
	p, err = New(Options{URL: "amqp://127.0.0.1:1/", ConfirmTimeout: time.Second, ConnectionName: "gw-1", CheckQueue: "fwd", CheckBinding: "wa.#"})
	if err != nil {
		t.Fatal(err)
	}
	if p.connName != "gw-1" {
		t.Errorf("connection name = %q, want the one given", p.connName)
	}
	if p.qcheck == nil || p.qcheck.queue != "fwd" || p.qcheck.binding != "wa.#" || p.qcheck.every != queueCheckEvery {
		t.Errorf("queue check = %+v, want fwd bound by wa.# every %s", p.qcheck, queueCheckEvery)
	}
}

// borda_webhook_broker_reconnects_total counts connections lost after
// being established: a failed dial before any session is not one, the
// loss of an up session is, and the "up" signal WaitReady waits on is
// open again once the session is down.
func TestSetDownCountsOnlyConnectionsThatWereUp(t *testing.T) {
	p, err := New(Options{URL: "amqp://127.0.0.1:1/", ConfirmTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p.setDown(errors.New("dial refused"))
	if got := value(t, p.metrics.reconnects); got != 0 {
		t.Errorf("a failed dial counted %v reconnects, want 0", got)
	}
	p.setUp(&amqp.Connection{}, nil)
	if got := value(t, p.metrics.connected); got != 1 {
		t.Errorf("borda_webhook_broker_connected = %v while up", got)
	}
	p.setDown(errors.New("connection reset"))
	if got := value(t, p.metrics.reconnects); got != 1 {
		t.Errorf("a lost session counted %v reconnects, want 1", got)
	}
	if got := value(t, p.metrics.connected); got != 0 {
		t.Errorf("borda_webhook_broker_connected = %v while down", got)
	}
	p.mu.RLock()
	up := p.upCh
	p.mu.RUnlock()
	select {
	case <-up:
		t.Error("the up signal is still closed after the session went down")
	default:
	}
}
