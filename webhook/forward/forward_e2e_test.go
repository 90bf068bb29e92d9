package forward

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/breaker"
	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/topology"
)

func readPayload(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/payloads/" + name)
	if err != nil {
		t.Fatalf("payload %s: %v", name, err)
	}
	return b
}

func TestForward_EmojiAndFormBodiesArriveByteExact(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, nil)
	h.start(nil)

	bodies := []struct{ id, ct string }{
		{"emoji", "application/json"},
		{"form", "application/x-www-form-urlencoded"},
		{"spaced", "application/json"},
	}
	raw := map[string][]byte{
		"emoji":  readPayload(t, "evolution-v2-messages-upsert-emoji.json"),
		"form":   readPayload(t, "form-urlencoded-messages-upsert.txt"),
		"spaced": []byte(`{"a": 1.0, "t": "Gold 🥇"}`),
	}
	for _, b := range bodies {
		h.publish(envelope.New(b.id, "evolution", b.ct,
			map[string]string{"user-agent": "Evolution/2.3", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "apikey": "FAKE", "cookie": "x=1"},
			raw[b.id], time.Now()))
	}
	eventually(t, 10*time.Second, "3 deliveries", func() bool { return len(end.delivered()) == 3 })

	for _, got := range end.all() {
		id := got.header.Get(HeaderIdempotencyKey)
		want := raw[id]
		if !bytes.Equal(got.body, want) {
			t.Errorf("%s: body %q, want the exact bytes %q", id, got.body, want)
		}
		if got.cl != int64(len(want)) || len(got.te) != 0 {
			t.Errorf("%s: Content-Length %d, Transfer-Encoding %v; want %d and no chunking", id, got.cl, got.te, len(want))
		}
		for _, b := range bodies {
			if b.id == id && got.header.Get("Content-Type") != b.ct {
				t.Errorf("%s: Content-Type %q, want %q", id, got.header.Get("Content-Type"), b.ct)
			}
		}
		if got.header.Get("User-Agent") != "Evolution/2.3" || got.header.Get("Traceparent") == "" {
			t.Errorf("%s: allowlisted headers lost: %v", id, got.header)
		}
		if got.header.Get("Apikey") != "" || got.header.Get("Cookie") != "" {
			t.Errorf("%s: a header outside the allowlist was forwarded: %v", id, got.header)
		}
		if err := Verify(got.header.Get(HeaderTimestamp), got.header.Get(HeaderSignature), got.body, time.Now(), []byte(testSecret)); err != nil {
			t.Errorf("%s: Verify: %v", id, err)
		}
		if sig := got.header.Get(HeaderSignature); sig != strings.ToLower(sig) || len(sig) != 64 {
			t.Errorf("%s: signature %q is not bare lower-case hex", id, sig)
		}
		ttl := h.rdb.PTTL(context.Background(), h.keys.ForwardEvent("evolution", id)).Val()
		if v := h.rdb.Get(context.Background(), h.keys.ForwardEvent("evolution", id)).Val(); v != "forwarded" || ttl <= 0 {
			t.Errorf("%s: key %q with TTL %s, want forwarded with a TTL", id, v, ttl)
		}
	}
}

func TestForward_400IsDeadLetteredAtOnceWithStatusAndExcerpt(t *testing.T) {
	end := newLegacy(t, always(action{status: 400, body: "{\"error\":\"campo inválido\"}\n\x00\x1b[31m"}))
	h := newHarness(t, end, nil)
	f := h.start(nil)
	h.publish(jsonEnvelope("bad-1", `{"x":1}`))

	d := h.dlq(1, 10*time.Second)[0]
	if got := len(end.all()); got != 1 {
		t.Errorf("POSTs = %d, want 1 (no retry of a 400)", got)
	}
	if d.MessageId != "bad-1" || IntHeader(d.Headers, HeaderDLQStatus) != 400 || IntHeader(d.Headers, HeaderAttempt) != 1 {
		t.Errorf("DLQ message id %q headers %v", d.MessageId, d.Headers)
	}
	ex := StringHeader(d.Headers, HeaderDLQExcerpt)
	if !strings.Contains(ex, "campo inválido") || strings.ContainsAny(ex, "\x00\x1b\n") {
		t.Errorf("excerpt %q: want the reply, printable", ex)
	}
	for _, k := range []string{HeaderDLQReason, HeaderFirstFailure, HeaderDeadLetteredAt} {
		if StringHeader(d.Headers, k) == "" {
			t.Errorf("DLQ header %s missing: %v", k, d.Headers)
		}
	}
	// The first failure is the POST's answer, not the letter's reason.
	if got := StringHeader(d.Headers, HeaderFirstReason); !strings.HasSuffix(got, "(HTTP 400)") {
		t.Errorf("first failure reason %q, want the POST's status", got)
	}
	eventually(t, 10*time.Second, "borda_forward_attempts observed once", func() bool {
		n, sum := observed(f.m.attempts)
		return n == 1 && sum == 1
	})
	// The key keeps the terminal state (a later copy is a duplicate; only
	// a replay takes it over: TestForward_ASecondCopyOfADeadLetteredEventIsADuplicate).
	// Marked once the dead letter is published (which the test read):
	// wait for it.
	eventually(t, 10*time.Second, "the idempotency key of a dead letter says "+valueDead, func() bool {
		return h.rdb.Get(context.Background(), h.keys.ForwardEvent("evolution", "bad-1")).Val() == valueDead
	})
}

func TestForward_5xxClimbsTheLadderThenDeadLetters(t *testing.T) {
	end := newLegacy(t, always(action{status: 503}))
	h := newHarness(t, end, nil)
	f := h.start(nil)
	h.publish(jsonEnvelope("down-1", `{"x":1}`))

	d := h.dlq(1, 10*time.Second)[0]
	if got := len(end.all()); got != 3 {
		t.Errorf("POSTs = %d, want 3 (first try + 2 rungs)", got)
	}
	if IntHeader(d.Headers, HeaderAttempt) != 3 || StringHeader(d.Headers, HeaderDLQReason) != "retries exhausted" {
		t.Errorf("DLQ headers %v", d.Headers)
	}
	for _, rung := range []string{"200ms", "400ms"} {
		if n := value(f.m.retries.WithLabelValues(rung)); n != 1 {
			t.Errorf("retries{rung=%s} = %v, want 1", rung, n)
		}
	}
	// Counted once the delivery is settled and acknowledged, after the
	// dead letter the test already read was published: wait for it.
	eventually(t, 10*time.Second, "dead_lettered{5xx} = 1", func() bool {
		return value(f.m.outcomes.WithLabelValues("dead_lettered", "5xx")) == 1
	})
	// Observed right after the outcome is counted: wait for it too.
	eventually(t, 5*time.Second, "borda_forward_attempts observed once, 3", func() bool {
		n, sum := observed(f.m.attempts)
		return n == 1 && sum == 3
	})
}

func TestForward_TimeoutDropAnd429AreRetriedThenDelivered(t *testing.T) {
	end := newLegacy(t, func(n int, _ string) action {
		switch n {
		case 0:
			return action{sleep: 3 * time.Second} // past the 1s POST timeout
		case 1:
			return action{drop: true}
		case 2:
			return action{status: 429, retryAfter: "0"}
		}
		return action{status: 204}
	})
	h := newHarness(t, end, func(c *harnessConfig) {
		c.Topology.Retry = []topology.Delay{{Name: "100ms", TTL: 100 * time.Millisecond}, {Name: "150ms", TTL: 150 * time.Millisecond}, {Name: "200ms", TTL: 200 * time.Millisecond}}
	})
	var tape servicetest.LogBuffer
	f := h.start(func(f *Forwarder) {
		f.log = slog.New(slog.NewTextHandler(&tape, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	h.publish(jsonEnvelope("flaky-1", `{"x":1}`))
	eventually(t, 15*time.Second, "delivery", func() bool { return end.delivered()["flaky-1"] == 1 })
	if got := len(end.all()); got != 4 {
		t.Errorf("POSTs = %d, want 4", got)
	}
	// The event's last outcome is recorded before its ack: once it is
	// "delivered" it can no longer be dead-lettered (no fixed grace).
	eventually(t, 5*time.Second, "the delivered outcome", func() bool { return outcomeTotal(t, f, "delivered") == 1 })
	// Observed and logged right after the outcome is counted: wait for
	// them too. The delivery's debug line names its attempt.
	eventually(t, 5*time.Second, "borda_forward_attempts observed once, 4", func() bool {
		n, sum := observed(f.m.attempts)
		return n == 1 && sum == 4
	})
	eventually(t, 5*time.Second, "the delivery's debug line at attempt 4", func() bool {
		log := tape.String()
		return strings.Contains(log, "event delivered") && strings.Contains(log, "attempt=4")
	})
	// Three retries and an ack, each of which worked: no warning.
	for _, warn := range []string{"releasing the lease before a retry", "acking a delivered event"} {
		if log := tape.String(); strings.Contains(log, warn) {
			t.Errorf("logged %q though it worked:\n%s", warn, log)
		}
	}
	if n := outcomeTotal(t, f, "dead_lettered"); n != 0 {
		t.Errorf("dead_lettered outcomes = %v, want 0", n)
	}
	if n := h.depth(h.top.DLQ); n != 0 {
		t.Errorf("DLQ depth %d, want 0", n)
	}
}

func TestForward_MalformedAndDigestMismatchAreDeadLetteredWithoutPost(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, nil)
	f := h.start(nil)
	h.publishRaw("junk", []byte("not json"))
	env := jsonEnvelope("tampered", `{"x":1}`)
	env.Body = []byte(`{"x":2}`)
	b, _ := env.Encode()
	h.publishRaw("tampered", b)

	got := h.dlq(2, 10*time.Second)
	reasons, first := map[string]string{}, map[string]string{}
	for _, d := range got {
		reasons[d.MessageId] = StringHeader(d.Headers, HeaderDLQReason)
		first[d.MessageId] = StringHeader(d.Headers, HeaderFirstReason)
	}
	if reasons["junk"] != "undecodable envelope" || reasons["tampered"] != "sha256 mismatch" {
		t.Errorf("reasons %v", reasons)
	}
	// Never POSTed: the first failure is the letter's own reason, and no
	// attempt is observed.
	if first["junk"] != "undecodable envelope" || first["tampered"] != "sha256 mismatch" {
		t.Errorf("first failure reasons %v, want the letters' reasons", first)
	}
	eventually(t, 10*time.Second, "both dead letters counted", func() bool { return outcomeTotal(t, f, "dead_lettered") == 2 })
	if n, _ := observed(f.m.attempts); n != 0 {
		t.Errorf("borda_forward_attempts observed %d times for letters never POSTed, want 0", n)
	}
	if n := len(end.all()); n != 0 {
		t.Errorf("POSTs = %d, want 0", n)
	}
}

func TestForward_KilledBetweenPostAndAckIsNotPostedAgain(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, nil)
	var killed atomic.Bool
	f := h.start(func(f *Forwarder) {
		f.afterMark = func(ch *amqp.Channel) {
			if killed.CompareAndSwap(false, true) {
				ch.Close() // the worker dies before its ack: the broker redelivers
			}
		}
	})
	h.publish(jsonEnvelope("crash-1", `{"x":1}`))
	eventually(t, 10*time.Second, "the redelivery to be acked as a duplicate", func() bool {
		return value(f.m.outcomes.WithLabelValues("duplicate", "none")) == 1
	})
	if n := len(end.all()); n != 1 {
		t.Errorf("POSTs = %d, want 1 (the redelivery must not POST)", n)
	}
	eventually(t, 5*time.Second, "an empty queue", func() bool { return h.depth(h.top.ForwardQueue) == 0 })
}

func TestForward_LeaseHeldByAnotherWorkerIsNotPostedTwice(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, nil)
	ctx := context.Background()
	h.rdb.Set(ctx, h.keys.ForwardEvent("evolution", "held-1"), "processing:other-worker", 700*time.Millisecond)
	f := h.start(nil)
	h.publish(jsonEnvelope("held-1", `{"x":1}`))
	eventually(t, 5*time.Second, "a deferral", func() bool {
		return value(f.m.outcomes.WithLabelValues("deferred", "none")) >= 1
	})
	if n := len(end.all()); n != 0 {
		t.Fatalf("POSTed %d times while another worker held the lease", n)
	}
	eventually(t, 10*time.Second, "delivery after the lease expired", func() bool { return end.delivered()["held-1"] == 1 })
	// Settled: delivered and no message left to POST again.
	eventually(t, 5*time.Second, "the delivered outcome and an empty queue", func() bool {
		return outcomeTotal(t, f, "delivered") == 1 && h.depth(h.top.ForwardQueue) == 0
	})
	if n := len(end.all()); n != 1 {
		t.Errorf("POSTs = %d, want 1", n)
	}
}

func TestForward_EndpointDownThenBackDeliversEveryEventExactlyOnce(t *testing.T) {
	var up atomic.Bool
	end := newLegacy(t, func(n int, _ string) action {
		if !up.Load() {
			if n%2 == 0 {
				return action{status: 502}
			}
			return action{drop: true}
		}
		return action{status: 200}
	})
	h := newHarness(t, end, func(c *harnessConfig) {
		c.Topology.Retry = []topology.Delay{
			{Name: "200ms", TTL: 200 * time.Millisecond}, {Name: "400ms", TTL: 400 * time.Millisecond},
			{Name: "800ms", TTL: 800 * time.Millisecond}, {Name: "1s", TTL: time.Second}, {Name: "2s", TTL: 2 * time.Second},
		}
		c.Options.Breaker = BreakerOptions{Failures: 5, OpenFor: 500 * time.Millisecond}
	})
	f := h.start(nil)
	const n = 30
	for i := range n {
		h.publish(jsonEnvelope(fmt.Sprintf("ev-%02d", i), fmt.Sprintf(`{"i":%d}`, i)))
	}
	// The outage is real: events went down the ladder and the breaker
	// opened before the endpoint comes back.
	eventually(t, 15*time.Second, "retries and an opened breaker during the outage", func() bool {
		return outcomeTotal(t, f, "retried") >= 5 && f.breaker.Status().OpenedBy != ""
	})
	up.Store(true)
	eventually(t, 20*time.Second, "every event delivered", func() bool { return len(end.delivered()) == n })
	// Settled: every event has its final outcome and no copy waits in a
	// queue, so a second POST of any of them can no longer come.
	eventually(t, 10*time.Second, "every event settled", func() bool {
		if outcomeTotal(t, f, "delivered")+outcomeTotal(t, f, "dead_lettered") < n || h.depth(h.top.ForwardQueue) != 0 {
			return false
		}
		for i := range 5 {
			if h.depth(h.top.RetryQueue(i)) != 0 {
				return false
			}
		}
		return true
	})
	for id, c := range end.delivered() {
		if c != 1 {
			t.Errorf("%s delivered %d times, want exactly once", id, c)
		}
	}
	if d := h.depth(h.top.DLQ); d != 0 {
		t.Errorf("DLQ depth %d, want 0", d)
	}
}

func TestForward_BreakerOpenConsumesNothingThenProbesOnce(t *testing.T) {
	// Every POST checks the breaker's state as it arrives: one that lands
	// while the breaker is open is the failure, whenever it comes. The
	// open period is the forwarder's clock's: it ends when the test
	// advances it, not after a sleep.
	var fw atomic.Pointer[Forwarder]
	var whileOpen atomic.Int32
	end := newLegacy(t, func(int, string) action {
		if f := fw.Load(); f != nil && f.breaker.State() == breaker.StateOpen {
			whileOpen.Add(1)
		}
		return action{status: 500}
	})
	const openFor = 1500 * time.Millisecond
	clk := clock.NewManual(time.Now())
	h := newHarness(t, end, func(c *harnessConfig) {
		c.Options.Breaker = BreakerOptions{Failures: 3, OpenFor: openFor}
		c.Options.Clock = clk
		c.Options.Prefetch = 1
		c.Topology.Retry = []topology.Delay{{Name: "5s", TTL: 5 * time.Second}}
	})
	var tape servicetest.LogBuffer
	f := h.start(func(f *Forwarder) {
		f.log = slog.New(slog.NewTextHandler(&tape, nil))
		fw.Store(f)
	})
	for i := range 8 {
		h.publish(jsonEnvelope(fmt.Sprintf("b-%d", i), `{}`))
	}
	eventually(t, 5*time.Second, "the breaker to open", func() bool { return value(f.m.breaker) == 2 })
	opened := len(end.all())
	if opened != 3 {
		t.Errorf("POSTs before opening = %d, want 3", opened)
	}
	// While open the messages wait in the queue, no attempt spent.
	eventually(t, 5*time.Second, "five messages waiting while open", func() bool {
		return h.depth(h.top.ForwardQueue) == 5 && f.breaker.State() == breaker.StateOpen
	})
	// The breaker's opening stopped the consumer (not deliveries taken and
	// given back over and over while it is open).
	eventually(t, 5*time.Second, "the consumer stopped while open", func() bool {
		return !f.consuming.Load() && strings.Contains(tape.String(), `why="breaker open"`)
	})
	if log := tape.String(); strings.Contains(log, "cancelling consumer") {
		t.Errorf("the consumer was not cancelled cleanly for the open breaker:\n%s", log)
	}
	// Readiness names the cause, not its consequence as well.
	if r := f.Readiness(); len(r) != 1 || !strings.HasPrefix(r[0], "breaker: open") {
		t.Errorf("Readiness while open = %q, want the open breaker alone", r)
	}
	if n := len(end.all()); n != opened {
		t.Errorf("%d POSTs while the clock stood in the open period, want none", n-opened)
	}
	// The open period ends (half-open), one probe fails, and the breaker
	// opens again: the probe is the only POST since opening, and the
	// clock, no longer advanced, keeps it open.
	clk.Advance(openFor + time.Millisecond)
	eventually(t, 10*time.Second, "one half-open probe", func() bool { return len(end.all()) == opened+1 })
	eventually(t, 5*time.Second, "the breaker open again after the failed probe", func() bool {
		return f.breaker.State() == breaker.StateOpen
	})
	if n := len(end.all()); n != opened+1 {
		t.Errorf("POSTs after half-open = %d, want exactly one probe", n-opened)
	}
	if n := whileOpen.Load(); n != 0 {
		t.Errorf("%d POSTs arrived while the breaker was open, want none", n)
	}
	// The probe ran on the same session: nothing was redialled for it.
	eventually(t, 5*time.Second, "the probe's delivery settled (retried)", func() bool { return outcomeTotal(t, f, "retried") == float64(opened+1) })
	if log := tape.String(); strings.Contains(log, "forward session ended") {
		t.Errorf("the session ended around the half-open probe:\n%s", log)
	}
}

// outcomeTotal sums borda_forward_outcomes_total{outcome} over its classes.
func outcomeTotal(t *testing.T, f *Forwarder, outcome string) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { f.m.outcomes.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		for _, l := range out.Label {
			if l.GetName() == "outcome" && l.GetValue() == outcome {
				sum += out.Counter.GetValue()
			}
		}
	}
	return sum
}

func TestForward_SamplesQueueAgeAndDLQDepth(t *testing.T) {
	end := newLegacy(t, always(action{status: 400}))
	h := newHarness(t, end, nil)
	f := h.start(nil)
	h.publish(jsonEnvelope("dl-1", `{}`))
	eventually(t, 5*time.Second, "DLQ depth 1", func() bool { return value(f.m.dlqDepth) == 1 })
	// The operator page reads the same gauges through Status.
	if s := f.Status(); s.DLQDepth != 1 || s.QueueDepth != int64(value(f.m.queueDepth)) {
		t.Errorf("Status depths: DLQ %d, forward %d; want 1 and the gauge's %v", s.DLQDepth, s.QueueDepth, value(f.m.queueDepth))
	}
}

func TestForward_RetryAfterLongerThanTheRungPicksALaterRung(t *testing.T) {
	end := newLegacy(t, func(n int, _ string) action {
		if n == 0 {
			return action{status: 503, retryAfter: "1"}
		}
		return action{status: 200}
	})
	h := newHarness(t, end, func(c *harnessConfig) {
		c.Topology.Retry = []topology.Delay{{Name: "100ms", TTL: 100 * time.Millisecond}, {Name: "1s", TTL: time.Second}}
	})
	f := h.start(nil)
	h.publish(jsonEnvelope("ra-1", `{}`))
	eventually(t, 10*time.Second, "delivery", func() bool { return end.delivered()["ra-1"] == 1 })
	if a, b := value(f.m.retries.WithLabelValues("100ms")), value(f.m.retries.WithLabelValues("1s")); a != 0 || b != 1 {
		t.Errorf("retries 100ms=%v 1s=%v; want the 1s rung for Retry-After: 1", a, b)
	}
}

func TestForward_GracefulStopFinishesInFlightAndLosesNothing(t *testing.T) {
	var started atomic.Int32
	end := newLegacy(t, func(int, string) action { started.Add(1); return action{status: 200} })
	h := newHarness(t, end, func(c *harnessConfig) { c.Options.Prefetch = 2 })
	f, err := New(h.options())
	if err != nil {
		t.Fatal(err)
	}
	// Each delivery takes a while after its POST, so the stop lands
	// mid-delivery: in-flight ones must still be acked.
	f.afterMark = func(*amqp.Channel) { time.Sleep(300 * time.Millisecond) }
	var tape servicetest.LogBuffer
	f.log = slog.New(slog.NewTextHandler(&tape, nil))
	const n = 10
	for i := range n {
		h.publish(jsonEnvelope(fmt.Sprintf("gs-%d", i), `{}`))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	eventually(t, 5*time.Second, "a POST", func() bool { return started.Load() >= 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of the stop")
	}
	delivered := len(end.delivered())
	eventually(t, 5*time.Second, "the undelivered messages back in the queue", func() bool {
		return h.depth(h.top.ForwardQueue) == n-delivered
	})
	if delivered == 0 {
		t.Error("the in-flight deliveries were not finished")
	}
	if d := h.depth(h.top.DLQ); d != 0 {
		t.Errorf("DLQ depth %d, want 0", d)
	}
	// The stop was clean: the consumer cancelled and the republishing
	// connection closed without a warning.
	log := tape.String()
	for _, warn := range []string{"stopping the republishing connection", "cancelling consumer", "forward session ended"} {
		if strings.Contains(log, warn) {
			t.Errorf("a graceful stop logged %q:\n%s", warn, log)
		}
	}
	if !strings.Contains(log, `why=shutdown`) {
		t.Errorf("no consumer stop logged for the shutdown:\n%s", log)
	}
}
