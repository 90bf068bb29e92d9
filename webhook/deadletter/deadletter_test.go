package deadletter

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/redisconn"
	"github.com/olp-edu/borda/schema"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/forward"
	"github.com/olp-edu/borda/webhook/topology"
)

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if got, err := ParseSince("90m", now); err != nil || !got.Equal(now.Add(-90*time.Minute)) {
		t.Errorf("ParseSince(90m) = %v, %v", got, err)
	}
	if got, err := ParseSince("2026-01-01T06:00:00Z", now); err != nil || got.Hour() != 6 {
		t.Errorf("ParseSince(RFC 3339) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "yesterday", "-1h"} {
		if _, err := ParseSince(bad, now); err == nil {
			t.Errorf("ParseSince(%q) accepted", bad)
		}
	}
}

// testPool returns a pool on a schema of the test's own with the
// project's migrations applied (schema.Up, the code `borda migrate` runs),
// so webhook_replays is exactly what production gets.
func testPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, url := servicetest.IsolatedDatabase(t)
	if err := schema.Up(context.Background(), url); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	return pool
}

// TestReplay_AfterAFixReachesTheEndpointOnceAndIsAudited runs the real
// forwarder: a 400 dead-letters the event; list shows it without losing
// it; after the "fix" a replay reaches the endpoint once; a second copy
// replayed without --force is not POSTed again; with --force it is, and
// every replay is in webhook_replays.
func TestReplay_AfterAFixReachesTheEndpointOnceAndIsAudited(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	pub := newRepublisher(t, amqpURL)
	redisURL := servicetest.RedisURL(t)
	pool := testPool(t)
	name := servicetest.Name(t)
	eventID := name + "-ev"
	t.Cleanup(func() { pool.Exec(context.Background(), `DELETE FROM webhook_replays WHERE event_id = $1`, eventID) })

	var fixed atomic.Bool
	var mu sync.Mutex
	posts := map[string]int{} // 2xx by Idempotency-Key
	end := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !fixed.Load() {
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"erro":"instância desconhecida"}`)
			return
		}
		mu.Lock()
		posts[r.Header.Get(forward.HeaderIdempotencyKey)]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(end.Close)
	count := func() int { mu.Lock(); defer mu.Unlock(); return posts[eventID] }

	// The forwarder's typed options, built directly (the mapping from a
	// configuration file is tested in cmd/borda): one 200 ms retry delay,
	// a 1 s POST timeout, one source that keeps the bare id as its key.
	top := topology.Topology{
		Exchange: name + "-ex", RoutingKey: name + ".fwd",
		ForwardQueue: name + "-fwd", EventsQueue: name + "-events", EventsBinding: name + ".#",
		DLQ: name + "-dlq", Retry: []topology.Delay{{Name: "200ms", TTL: 200 * time.Millisecond}},
		QueueType: topology.QueueType("quorum"), RetryExchange: name + "-retry", DLXExchange: name + "-dlx",
	}
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := conn.Channel()
	if err := top.Declare(ch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, _ := conn.Channel()
		for _, q := range []string{top.ForwardQueue, top.EventsQueue, top.DLQ, top.RetryQueue(0)} {
			c.QueueDelete(q, false, false, false)
		}
		for _, e := range []string{top.Exchange, top.RetryExchange, top.DLXExchange} {
			c.ExchangeDelete(e, false, false)
		}
		conn.Close()
	})
	rdb, err := redisconn.New(redisconn.Options{URL: redisURL})
	if err != nil {
		t.Fatal(err)
	}
	keys := keyspace.MustNew(servicetest.KeyPrefix(t))
	t.Cleanup(func() { rdb.Del(context.Background(), keys.ForwardEvent("evolution", eventID)); rdb.Close() })

	reg := prometheus.NewRegistry()
	f, err := forward.New(forward.Options{
		URL: end.URL, HMACSecret: []byte("k"),
		Scrub:    func(text string) string { return text }, // no secret in this test's replies
		Prefetch: 20, Timeout: time.Second, LeaseTTL: 3 * time.Second, RetentionTTL: time.Hour,
		Breaker:  forward.BreakerOptions{Failures: 10, OpenFor: 30 * time.Second},
		Topology: top, AMQPURL: amqpURL, Redis: rdb, Keys: keys, BareKeySource: "evolution",
		Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	duplicates := func() float64 { return outcomeCount(t, reg, "duplicate") }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	env := envelope.New(eventID, "evolution", "application/json", nil, []byte(`{"event":"messages.upsert"}`), time.Now())
	b, _ := env.Encode()
	pubMsg := amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: eventID, ContentType: envelope.ContentType, Body: b}
	if err := ch.PublishWithContext(ctx, top.Exchange, top.RoutingKey, false, false, pubMsg); err != nil {
		t.Fatal(err)
	}
	waitDepth(t, ch, top.DLQ, 1)

	// list twice: nothing is lost.
	for range 2 {
		letters, err := List(ctx, conn, pub, top.DLQ, 0)
		if err != nil || len(letters) != 1 {
			t.Fatalf("List = %v, %v; want one letter", letters, err)
		}
		l := letters[0]
		if l.ID != eventID || l.Source != "evolution" || l.Attempts != 1 || l.Status != 422 ||
			!strings.Contains(l.FirstReason, "422") || l.DeadLetteredAt.IsZero() || l.Age(time.Now()) < 0 {
			t.Errorf("letter %+v", l)
		}
	}
	waitDepth(t, ch, top.DLQ, 1)

	// The fix, then the replay.
	fixed.Store(true)
	out, err := Replay(ctx, conn, pub, pool, ReplayOptions{DLQ: top.DLQ, ForwardQueue: top.ForwardQueue,
		Select: Selection{ID: eventID}, Operator: "ana", Reason: "legacy instance registered"})
	if err != nil || len(out) != 1 || out[0].Outcome != OutcomeRepublished {
		t.Fatalf("Replay = %+v, %v", out, err)
	}
	eventually(t, "the replay to reach the endpoint", func() bool { return count() == 1 })
	waitDepth(t, ch, top.DLQ, 0)

	// The same dead letter again (e.g. a replay that died before its ack):
	// without --force the forwarder's idempotency key stops a second POST.
	dl := pubMsg
	dl.Headers = amqp.Table{forward.HeaderDeadLetteredAt: time.Now().UTC().Format(time.RFC3339Nano), forward.HeaderSource: "evolution"}
	if err := ch.PublishWithContext(ctx, top.DLXExchange, top.DLQRoutingKey(), false, false, dl); err != nil {
		t.Fatal(err)
	}
	waitDepth(t, ch, top.DLQ, 1)
	since := time.Now().Add(-time.Minute)
	if out, err := Replay(ctx, conn, pub, pool, ReplayOptions{DLQ: top.DLQ, ForwardQueue: top.ForwardQueue,
		Select: Selection{Since: since}, Operator: "ana", Reason: "again"}); err != nil || len(out) != 1 {
		t.Fatalf("second Replay = %+v, %v", out, err)
	}
	// The forwarder settled the copy as a duplicate (it did consume it),
	// and did not POST it.
	eventually(t, "the forwarder to settle the copy as a duplicate", func() bool { return duplicates() == 1 })
	if n := count(); n != 1 {
		t.Fatalf("POSTs after a second replay without --force = %d, want 1", n)
	}

	// --force POSTs again, and says so in the audit table.
	if err := ch.PublishWithContext(ctx, top.DLXExchange, top.DLQRoutingKey(), false, false, dl); err != nil {
		t.Fatal(err)
	}
	waitDepth(t, ch, top.DLQ, 1)
	if out, err := Replay(ctx, conn, pub, pool, ReplayOptions{DLQ: top.DLQ, ForwardQueue: top.ForwardQueue,
		Select: Selection{ID: eventID}, Operator: "bia", Reason: "legacy lost it", Force: true}); err != nil || len(out) != 1 {
		t.Fatalf("forced Replay = %+v, %v", out, err)
	}
	eventually(t, "the forced replay to reach the endpoint", func() bool { return count() == 2 })

	rows, err := pool.Query(ctx, `SELECT operator, reason, forced, outcome FROM webhook_replays WHERE event_id = $1 ORDER BY id`, eventID)
	if err != nil {
		t.Fatal(err)
	}
	var audit []string
	for rows.Next() {
		var op, reason, outcome string
		var forced bool
		rows.Scan(&op, &reason, &forced, &outcome)
		audit = append(audit, strings.Join([]string{op, reason, map[bool]string{true: "forced", false: "-"}[forced], outcome}, "|"))
	}
	want := []string{"ana|legacy instance registered|-|republished", "ana|again|-|republished", "bia|legacy lost it|forced|republished"}
	if strings.Join(audit, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit rows:\n%s\nwant:\n%s", strings.Join(audit, "\n"), strings.Join(want, "\n"))
	}
}

// outcomeCount sums borda_forward_outcomes_total{outcome} over its classes.
func outcomeCount(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "borda_forward_outcomes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

func waitDepth(t *testing.T, ch *amqp.Channel, queue string, want int) {
	t.Helper()
	eventually(t, queue+" depth", func() bool {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		return err == nil && q.Messages == want
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
