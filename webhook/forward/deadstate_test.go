package forward

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/envelope"
)

// The dedup state machine of docs/forwarder.md ("The dedup state
// machine"): each row of its table is one case here, against real Redis,
// over RESP and over the Upstash REST API.
func TestStore_DedupStateMachine(t *testing.T) {
	t.Parallel()
	overEachTransport(t, func(t *testing.T, transport string) {
		t.Parallel()
		h := newHarness(t, newLegacy(t, always(action{status: 200})), over(transport))
		const lease, retention = 3 * time.Second, time.Hour
		s := NewStore(h.rdb, h.keys, lease, retention, "")
		ctx := context.Background()

		cases := []struct {
			name          string
			before        string // "" absent
			forced        string // forcedReplay
			replay        string // replayID
			want          Claim
			after         string // the value afterwards; "lease" for this attempt's lease
			markDead      bool   // after Acquired, MarkDead and expect afterDead
			markForwarded bool   // after Acquired, MarkForwarded and expect afterDead
			afterMark     string
		}{
			{name: "absent/new delivery", want: Acquired, after: "lease"},
			{name: "in flight/another copy", before: "processing:other", want: Held, after: "processing:other"},
			{name: "in flight/a replay", before: "processing:other", replay: "7", want: Held, after: "processing:other"},
			{name: "forwarded/another copy", before: "forwarded", want: AlreadyForwarded, after: "forwarded"},
			{name: "forwarded/a replay without force", before: "forwarded", replay: "7", want: AlreadyForwarded, after: "forwarded"},
			{name: "forwarded/a forced replay", before: "forwarded", forced: "7", replay: "7", want: Acquired, after: "lease", markForwarded: true, afterMark: "forwarded:7"},
			{name: "forwarded by that forced replay/its redelivery", before: "forwarded:7", forced: "7", replay: "7", want: AlreadyForwarded, after: "forwarded:7"},
			{name: "dead/another copy", before: "dead", want: AlreadyDead, after: "dead"},
			{name: "dead/a replay", before: "dead", replay: "7", want: Acquired, after: "lease", markForwarded: true, afterMark: "forwarded"},
			{name: "dead/a replay dead-lettered again", before: "dead", replay: "7", want: Acquired, after: "lease", markDead: true, afterMark: "dead:7"},
			{name: "dead by a replay/its redelivery", before: "dead:7", replay: "7", want: AlreadyDead, after: "dead:7"},
			{name: "dead by a replay/a later replay", before: "dead:7", replay: "8", want: Acquired, after: "lease"},
			{name: "dead by a replay/another copy", before: "dead:7", want: AlreadyDead, after: "dead:7"},
			{name: "absent/dead-lettered", want: Acquired, after: "lease", markDead: true, afterMark: "dead"},
			{name: "absent/delivered", want: Acquired, after: "lease", markForwarded: true, afterMark: "forwarded"},
		}
		for i, c := range cases {
			id := "sm-" + string(rune('a'+i))
			key := h.keys.ForwardEvent("evolution", id)
			if c.before != "" {
				h.rdb.Set(ctx, key, c.before, retention)
			}
			claim, l, held, err := s.Acquire(ctx, "evolution", id, "tok", c.forced, c.replay)
			if err != nil {
				t.Fatalf("%s: Acquire: %v", c.name, err)
			}
			if claim != c.want {
				t.Errorf("%s: claim %d, want %d", c.name, claim, c.want)
				continue
			}
			// Held says for how long: the other lease's remaining TTL.
			if claim == Held && (held <= retention-time.Minute || held > retention) {
				t.Errorf("%s: held for %v, want the other lease's TTL (about %v)", c.name, held, retention)
			}
			want := c.after
			if want == "lease" {
				want = valueLeasePrefixed + "tok"
			}
			if got := h.rdb.Get(ctx, key).Val(); got != want {
				t.Errorf("%s: key %q after Acquire, want %q", c.name, got, want)
			}
			if !c.markDead && !c.markForwarded {
				continue
			}
			var ok bool
			if c.markDead {
				ok, err = s.MarkDead(ctx, l)
			} else {
				ok, err = s.MarkForwarded(ctx, l)
			}
			if err != nil || !ok {
				t.Errorf("%s: mark = %v, %v", c.name, ok, err)
			}
			if got, ttl := h.rdb.Get(ctx, key).Val(), h.rdb.PTTL(ctx, key).Val(); got != c.afterMark || ttl <= lease || ttl > retention {
				t.Errorf("%s: key %q (TTL %s) after the mark, want %q with the retention TTL", c.name, got, ttl, c.afterMark)
			}
		}

		// The marks are compare-and-set: a lease that expired and was taken
		// by another worker moves nothing, and a dead mark never overwrites
		// forwarded; a delivery whose lease expired while another copy was
		// dead-lettered records that it was POSTed (forwarded, wasDead).
		key := h.keys.ForwardEvent("evolution", "cas")
		_, l, _, _ := s.Acquire(ctx, "evolution", "cas", "mine", "", "")
		h.rdb.Set(ctx, key, "processing:theirs", lease)
		if ok, err := s.MarkDead(ctx, l); ok || err != nil {
			t.Errorf("MarkDead over another lease = %v, %v; want false", ok, err)
		}
		h.rdb.Set(ctx, key, "forwarded", retention)
		if ok, _ := s.MarkDead(ctx, l); ok || h.rdb.Get(ctx, key).Val() != "forwarded" {
			t.Errorf("MarkDead over forwarded = %v, key %q; want false and forwarded kept", ok, h.rdb.Get(ctx, key).Val())
		}
		h.rdb.Set(ctx, key, "dead", retention)
		if ok, wasDead, err := s.markForwarded(ctx, l); !ok || !wasDead || err != nil || h.rdb.Get(ctx, key).Val() != "forwarded" {
			t.Errorf("markForwarded over dead = %v, %v, %v, key %q; want forwarded, wasDead", ok, wasDead, err, h.rdb.Get(ctx, key).Val())
		}
		// Retried through the ladder: the lease is released, the key absent.
		_, l2, _, _ := s.Acquire(ctx, "evolution", "ladder", "tok", "", "")
		if err := s.Release(ctx, l2); err != nil || h.rdb.Exists(ctx, h.keys.ForwardEvent("evolution", "ladder")).Val() != 0 {
			t.Errorf("Release before a retry: %v; want the key gone", err)
		}
	})
}

// settled waits until the forwarder counted n duplicates or the DLQ or
// the endpoint shows the event went through again, whichever comes first.
func settled(t *testing.T, h *harness, f *Forwarder, n int64, posts, letters int) {
	t.Helper()
	eventually(t, 20*time.Second, "the second copy settled", func() bool {
		return f.Status().Duplicates >= n || len(h.end.all()) > posts || h.depth(h.top.DLQ) > letters
	})
}

// A second copy of a dead-lettered event (the provider retried after a
// 503 whose publish landed; two serve replicas published it) used to be
// processed again once dead-lettering released its key: POSTed after its
// dead letter when the endpoint had recovered, or dead-lettered twice.
// Now its key says dead and the copy is a visible duplicate.
func TestForward_ASecondCopyOfADeadLetteredEventIsADuplicate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		then int // the endpoint's answer to the second copy
	}{{"endpoint recovered", 200}, {"endpoint still refuses", 400}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			end := newLegacy(t, func(n int, _ string) action {
				if n == 0 {
					return action{status: 400, body: "campo inválido"}
				}
				return action{status: c.then}
			})
			h := newHarness(t, end, nil)
			f := h.start(nil)
			env := jsonEnvelope("dead-1", `{"x":1}`)
			h.publish(env)
			eventually(t, 10*time.Second, "the first copy dead-lettered", func() bool { return h.depth(h.top.DLQ) == 1 })
			key := h.keys.ForwardEvent("evolution", "dead-1")
			// The key is marked dead once the dead letter is published
			// (which the depth showed): wait for it, then check its TTL.
			eventually(t, 10*time.Second, "the key of the dead letter marked "+valueDead, func() bool {
				return h.rdb.Get(context.Background(), key).Val() == valueDead
			})
			if ttl := h.rdb.PTTL(context.Background(), key).Val(); ttl <= h.cfg.Options.LeaseTTL {
				t.Errorf("key of a dead letter has TTL %s, want the retention TTL (past the lease's %s)", ttl, h.cfg.Options.LeaseTTL)
			}

			h.publish(env)
			settled(t, h, f, 1, 1, 1)
			if got := len(end.all()); got != 1 {
				t.Errorf("POSTs = %d, want 1 (the second copy of a dead-lettered event must not be POSTed)", got)
			}
			if d := h.depth(h.top.DLQ); d != 1 {
				t.Errorf("DLQ depth = %d, want 1 (one event, one dead letter)", d)
			}
			s := f.Status()
			if s.Duplicates != 1 || s.LastDuplicate.State != stateDead || s.LastDuplicate.Key != key {
				t.Errorf("status duplicates %d, last %+v; want 1 dead duplicate on %s", s.Duplicates, s.LastDuplicate, key)
			}
			if n := value(f.m.outcomes.WithLabelValues("duplicate", "dead")); n != 1 {
				t.Errorf("outcomes{duplicate,dead} = %v, want 1", n)
			}
		})
	}
}

// Two copies of one event published at once climb the ladder side by
// side (the key is released while a copy waits on a rung); the first to
// exhaust it is dead-lettered and marks the key dead, so the other is a
// duplicate when it comes back, not a second dead letter.
func TestForward_TwoCopiesOnTheLadderMakeOneDeadLetter(t *testing.T) {
	t.Parallel()
	end := newLegacy(t, always(action{status: 503}))
	h := newHarness(t, end, func(c *harnessConfig) { c.Options.LeaseTTL = 1500 * time.Millisecond })
	f := h.start(nil)
	env := jsonEnvelope("twin-1", `{}`)
	h.publish(env)
	h.publish(env)
	eventually(t, 30*time.Second, "both copies settled", func() bool {
		return h.depth(h.top.DLQ) >= 2 || (h.depth(h.top.DLQ) == 1 && f.Status().Duplicates >= 1)
	})
	if d := h.depth(h.top.DLQ); d != 1 {
		t.Errorf("DLQ depth = %d, want 1 (two copies of one event, one dead letter)", d)
	}
	if s := f.Status(); s.LastDuplicate.State != stateDead {
		t.Errorf("last duplicate %+v, want the dead one", s.LastDuplicate)
	}
}

// A `borda dlq replay` copy (x-borda-replay) takes a dead key over once
// per replay: dead-lettered again the key says dead:<replay>, so a
// redelivery of that copy is a duplicate while a later replay is POSTed.
func TestForward_AReplayTakesOverADeadKeyOncePerReplay(t *testing.T) {
	t.Parallel()
	var fixed atomic.Bool
	end := newLegacy(t, func(int, string) action {
		if fixed.Load() {
			return action{status: 200}
		}
		return action{status: 400}
	})
	h := newHarness(t, end, nil)
	f := h.start(nil)
	env := jsonEnvelope("rp-1", `{}`)
	b, _ := env.Encode()
	replay := func(id string) {
		t.Helper()
		err := h.ch.PublishWithContext(context.Background(), "", h.top.ForwardQueue, false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, MessageId: env.ID, ContentType: envelope.ContentType, Body: b,
			Headers: amqp.Table{HeaderReplay: id},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	key := h.keys.ForwardEvent("evolution", "rp-1")
	get := func() string { return h.rdb.Get(context.Background(), key).Val() }

	h.publish(env)
	eventually(t, 10*time.Second, "dead-lettered", func() bool { return h.depth(h.top.DLQ) == 1 })
	replay("7") // still refused: dead-lettered again
	eventually(t, 10*time.Second, "the replay dead-lettered again", func() bool { return h.depth(h.top.DLQ) == 2 && get() == "dead:7" })
	replay("7") // its redelivery: a duplicate
	eventually(t, 10*time.Second, "the redelivered replay acked as a duplicate", func() bool { return f.Status().Duplicates == 1 })
	fixed.Store(true)
	replay("8")
	eventually(t, 10*time.Second, "the later replay POSTed", func() bool { return len(end.delivered()) == 1 && get() == valueForwarded })
	replay("8") // a replay of a forwarded event without --force
	eventually(t, 10*time.Second, "a duplicate", func() bool { return f.Status().Duplicates == 2 })
	if got, posts := h.depth(h.top.DLQ), len(end.all()); got != 2 || posts != 3 {
		t.Errorf("DLQ %d, POSTs %d; want 2 letters and 3 POSTs (the event, replay 7, replay 8)", got, posts)
	}
}

// hook calls fn on each log record whose message starts with prefix.
type hook struct {
	slog.Handler
	prefix string
	fn     func()
}

func (h hook) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.fn()
	}
	return nil
}
func (h hook) Enabled(context.Context, slog.Level) bool { return true }
func (h hook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h hook) WithGroup(string) slog.Handler            { return h }

// A Redis error right after the outcome (the POST answered, the dead
// letter confirmed) used to leave the key as the lease: the delivery was
// acked unmarked, so a later copy was POSTed again (or dead-lettered
// again) once the lease expired. The mark is now retried, bounded, before
// the ack: a transient error does not lose it. The outage starts inside
// the endpoint's handler and ends at the first retry of the mark (or, on
// a build without it, once the delivery is settled).
func TestForward_ARedisBlipAfterTheOutcomeDoesNotLoseTheMark(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		status int
		state  string
	}{{"delivered", 200, valueForwarded}, {"dead-lettered", 400, valueDead}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			proxy, viaProxy := redisBehindProxy(t)
			var cut atomic.Bool
			end := newLegacy(t, func(n int, _ string) action {
				if n == 0 {
					cut.Store(true)
					proxy.SetDown(true)
				}
				return action{status: c.status}
			})
			h := newHarness(t, end, viaProxy)
			restore := func() {
				if cut.CompareAndSwap(true, false) {
					proxy.SetDown(false)
				}
			}
			opts := h.options()
			opts.SampleEvery, opts.Reconnect = 100*time.Millisecond, 100*time.Millisecond
			opts.Logger = slog.New(hook{Handler: slog.DiscardHandler, prefix: "marking the idempotency key failed", fn: restore})
			f := h.run(opts, nil)

			env := jsonEnvelope("blip-1", `{}`)
			h.publish(env)
			eventually(t, 15*time.Second, "the first copy settled", func() bool {
				return outcomeTotal(t, f, "delivered")+outcomeTotal(t, f, "dead_lettered") >= 1
			})
			restore()
			key := h.keys.ForwardEvent("evolution", "blip-1")
			if v := h.rdb.Get(context.Background(), key).Val(); v != c.state {
				t.Errorf("key after a Redis blip right after the outcome = %q, want %q", v, c.state)
			}
			h.publish(env)
			eventually(t, 20*time.Second, "the second copy settled", func() bool {
				return f.Status().Duplicates >= 1 || len(end.all()) > 1
			})
			if got := len(end.all()); got != 1 {
				t.Errorf("POSTs = %d, want 1 (the mark was lost, the second copy was processed)", got)
			}
		})
	}
}
