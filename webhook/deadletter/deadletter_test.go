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
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/configs"
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

	cfg := configs.Default()
	cfg.Webhook.Exchange, cfg.Webhook.RoutingKey = name+"-ex", name+".fwd"
	cfg.Forward.Queue, cfg.Forward.DLQ, cfg.Forward.EventsQueue = name+"-fwd", name+"-dlq", name+"-events"
	cfg.Forward.RetryDelays = []configs.Delay{{Name: "200ms", D: 200 * time.Millisecond}}
	cfg.Forward.Timeout = configs.Duration(time.Second)
	cfg.Forward.URL, cfg.Forward.HMACSecret = end.URL, "k"
	cfg.Redis.URL, cfg.Redis.KeyPrefix = configs.Secret(redisURL), servicetest.KeyPrefix(t)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	top := topology.Topology{
		Exchange: cfg.Webhook.Exchange, RoutingKey: cfg.Webhook.RoutingKey,
		ForwardQueue: cfg.Forward.Queue, EventsQueue: cfg.Forward.EventsQueue, EventsBinding: configs.EventsBindingFor(cfg.Webhook.RoutingKey),
		DLQ: cfg.Forward.DLQ, Retry: []topology.Delay{{Name: "200ms", TTL: 200 * time.Millisecond}},
		QueueType: topology.QueueType(cfg.Webhook.QueueType), RetryExchange: name + "-retry", DLXExchange: name + "-dlx",
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
	rdb, _ := redisconn.New(redisconn.Options{URL: cfg.Redis.URL.Reveal(), Cluster: cfg.Redis.Cluster})
	keys := keyspace.MustNew(cfg.KeyPrefix())
	t.Cleanup(func() { rdb.Del(context.Background(), keys.ForwardEvent("evolution", eventID)); rdb.Close() })

	fw := cfg.Forward
	f, err := forward.New(forward.Options{
		URL: fw.URL, HMACSecret: []byte(fw.HMACSecret.Reveal()),
		Scrub:    func(text string) string { return configs.ScrubSecrets(text, configs.URLSecrets(fw.URL)) },
		Prefetch: fw.Prefetch, Timeout: fw.Timeout.D(), LeaseTTL: fw.LeaseTTL.D(), RetentionTTL: fw.RetentionTTL.D(),
		Breaker:  forward.BreakerOptions{Failures: fw.Breaker.Failures, OpenFor: fw.Breaker.OpenFor.D()},
		Topology: top, AMQPURL: amqpURL, Redis: rdb, Keys: keys, BareKeySource: "evolution",
	})
	if err != nil {
		t.Fatal(err)
	}
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

	// The fix, then a second copy of the event (the provider retried after
	// a 503 whose publish landed): its key says dead, so it is acked as a
	// duplicate, neither POSTed after the dead letter nor dead-lettered
	// again; only the replay below re-delivers it.
	fixed.Store(true)
	if err := ch.PublishWithContext(ctx, top.Exchange, top.RoutingKey, false, false, pubMsg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second copy to be settled", func() bool { return f.Status().Duplicates == 1 || count() > 0 })
	if n, dlq := count(), f.Status().LastDuplicate; n != 0 || dlq.State != "dead" {
		t.Fatalf("a second copy of a dead-lettered event: POSTs = %d, last duplicate %+v; want 0 and a dead duplicate", n, dlq)
	}
	waitDepth(t, ch, top.DLQ, 1)

	// The replay.
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
	waitDepth(t, ch, top.ForwardQueue, 0)
	time.Sleep(300 * time.Millisecond)
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
