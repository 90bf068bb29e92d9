package instances

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/schema"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/topology"
)

func payload(t *testing.T, name, instance string) []byte {
	t.Helper()
	b, err := os.ReadFile("../webhook/testdata/payloads/" + name)
	if err != nil {
		t.Fatalf("payload %s: %v", name, err)
	}
	return []byte(strings.ReplaceAll(string(b), "test-instance-01", instance))
}

// testPool returns a pool on a schema of the test's own with the
// project's migrations applied (schema.Up, the code `borda migrate` runs),
// so whatsapp_instances is exactly what production gets.
func testPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, url := servicetest.IsolatedDatabase(t)
	if err := schema.Up(context.Background(), url); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	return pool
}

func TestParse(t *testing.T) {
	t.Parallel()
	open := payload(t, "evolution-v2-connection-update-2-open.json", "i-1")
	u, ok, err := Parse("application/json", open)
	if !ok || err != nil || u.Instance != "i-1" || u.State != "open" || u.Reason == nil || *u.Reason != 200 ||
		!u.EventTime.Equal(time.Date(2026, 1, 1, 6, 40, 35, 780e6, time.UTC)) {
		t.Fatalf("Parse(open) = %+v, %v, %v", u, ok, err)
	}
	form := "payload=" + url.QueryEscape(`{"event":"CONNECTION_UPDATE","instance":"i-2","data":{"state":"close"},"date_time":"2026-01-01T06:40:01Z"}`)
	if u, ok, err := Parse("application/x-www-form-urlencoded; charset=utf-8", []byte(form)); !ok || err != nil || u.State != "close" || u.Reason != nil {
		t.Errorf("Parse(form) = %+v, %v, %v", u, ok, err)
	}
	if _, ok, _ := Parse("application/json", payload(t, "evolution-v2-messages-upsert.json", "x")); ok {
		t.Error("messages.upsert parsed as a connection update")
	}
	if _, ok, err := Parse("application/json", []byte(`{"event":"connection.update","instance":"i","data":{"state":"open"},"date_time":"yesterday"}`)); !ok || err == nil {
		t.Errorf("bad date_time: ok %v err %v, want ErrMalformed", ok, err)
	}
}

// TestParseReadsMemberNamesExactly (fresh attack pass A34): encoding/json's
// struct decoding matches "Instance", "EVENT", "State" and "ſtate" (U+017F)
// to the lower-case fields and keeps the last, so consume-events wrote
// victim-inst/close while PHP, Python and JavaScript read legit-inst/open.
// Names are read exactly, as those readers do; a repeated exact name
// keeps the last, as they do.
func TestParseReadsMemberNamesExactly(t *testing.T) {
	t.Parallel()
	const at = `"date_time":"2026-01-01T06:40:01Z"`
	for _, tt := range []struct {
		body            string
		ok              bool
		instance, state string
	}{
		{`{"event":"connection.update","instance":"legit-inst","Instance":"victim-inst","data":{"state":"open","State":"close"},` + at + `}`, true, "legit-inst", "open"},
		{`{"event":"messages.upsert","EVENT":"connection.update","instance":"kelvin-inst","data":{"key":{"id":"k1"},"\u017ftate":"close"},` + at + `}`, false, "", ""},
		{`{"Event":"connection.update","instance":"i","data":{"state":"open"},` + at + `}`, false, "", ""},
		{`{"event":"connection.update","INSTANCE":"x","data":{"instance":"i","ſtate":"close","state":"open"},` + at + `}`, true, "i", "open"},
		{`{"event":"connection.update","instance":"i","data":{"\u212aey":1,"state":"open","STATE":"close"},` + at + `}`, true, "i", "open"},
		{`{"event":"connection.update","instance":"a","instance":"b","data":{"state":"open"},` + at + `}`, true, "b", "open"},
	} {
		u, ok, err := Parse("application/json", []byte(tt.body))
		if ok != tt.ok || (ok && (err != nil || u.Instance != tt.instance || u.State != tt.state)) {
			t.Errorf("Parse(%s) = %+v, %v, %v; want ok %v instance %q state %q", tt.body, u, ok, err, tt.ok, tt.instance, tt.state)
		}
	}
	if _, ok, err := Parse("application/json", []byte(`{"event":"connection.update","Instance":"victim","data":{"State":"close"},`+at+`}`)); !ok || err == nil {
		t.Errorf("only case-folded names: ok %v err %v, want ErrMalformed (no instance or state)", ok, err)
	}
}

type state struct {
	state     string
	reason    *int
	eventTime time.Time
}

func readState(t *testing.T, pool *pgxpool.Pool, instance string) state {
	t.Helper()
	var s state
	err := pool.QueryRow(context.Background(), `SELECT state, state_reason, event_time FROM whatsapp_instances WHERE instance = $1`, instance).
		Scan(&s.state, &s.reason, &s.eventTime)
	if err != nil && err != pgx.ErrNoRows {
		t.Fatalf("reading whatsapp_instances: %v", err)
	}
	return s
}

func TestConsumer_OutOfOrderConnectionUpdatesLeaveTheNewestState(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	pool := testPool(t)
	name := servicetest.Name(t)
	instance := name + "-inst"
	t.Cleanup(func() {
		pool.Exec(context.Background(), `DELETE FROM whatsapp_instances WHERE instance = $1`, instance)
	})

	top := topology.Topology{
		Exchange: name + "-ex", RoutingKey: name + ".fwd",
		ForwardQueue: name + "-fwd", DLQ: name + "-dlq", EventsQueue: name + "-events",
		EventsBinding: name + ".#", // the routing key's last word replaced by # (docs/forwarder.md)
		Retry:         []topology.Delay{{Name: "1s", TTL: time.Second}}, QueueType: topology.Quorum,
		RetryExchange: name + "-retry", DLXExchange: name + "-dlx",
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
		for _, q := range []string{top.ForwardQueue, top.EventsQueue, top.DLQ, top.RetryQueue(0)} {
			ch.QueueDelete(q, false, false, false)
		}
		for _, e := range []string{top.Exchange, top.RetryExchange, top.DLXExchange} {
			ch.ExchangeDelete(e, false, false)
		}
		conn.Close()
	})

	c, err := New(Options{AMQPURL: amqpURL, Queue: top.EventsQueue, DB: pool, Prefetch: 20})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Newest first, then the older ones, then a redelivery of the newest
	// and an event of another kind.
	for i, f := range []string{
		"evolution-v2-connection-update-3-close.json",
		"evolution-v2-connection-update-1-connecting.json",
		"evolution-v2-connection-update-2-open.json",
		"evolution-v2-connection-update-3-close.json",
		"evolution-v2-messages-upsert.json",
	} {
		env := envelope.New(fmt.Sprintf("%s-%d", name, i), "evolution", "application/json", nil, payload(t, f, instance), time.Now())
		b, _ := env.Encode()
		err := ch.PublishWithContext(ctx, top.Exchange, top.RoutingKey, false, false, amqp.Publishing{ // as the ingress does
			DeliveryMode: amqp.Persistent, MessageId: env.ID, ContentType: envelope.ContentType, Body: b,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for value(c, "skipped")+value(c, "applied")+value(c, "ignored") < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %v applied, %v skipped, %v ignored within 10s", value(c, "applied"), value(c, "skipped"), value(c, "ignored"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s := readState(t, pool, instance)
	if s.state != "close" || s.reason == nil || *s.reason != 401 || !s.eventTime.Equal(time.Date(2026, 1, 1, 18, 5, 12, 4e6, time.UTC)) {
		t.Errorf("stored %+v, want close/401 at 18:05:12.004", s)
	}
	if a, sk, ig := value(c, "applied"), value(c, "skipped"), value(c, "ignored"); a != 1 || sk != 3 || ig != 1 {
		t.Errorf("applied %v skipped %v ignored %v; want 1, 3, 1", a, sk, ig)
	}
}

func value(c *Consumer, result string) float64 {
	var m dto.Metric
	_ = c.events.WithLabelValues(result).Write(&m)
	return m.GetCounter().GetValue()
}

func TestMigrations_ApplyOnAFreshDatabase(t *testing.T) {
	dbURL := servicetest.DatabaseURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := strings.ReplaceAll(servicetest.Name(t), "-", "_")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatalf("creating database: %v", err)
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)") })
	u, _ := url.Parse(dbURL)
	u.Path = "/" + db
	if err := schema.Up(ctx, u.String()); err != nil {
		t.Fatalf("schema.Up: %v", err)
	}
	if err := schema.Up(ctx, u.String()); err != nil {
		t.Fatalf("schema.Up twice: %v", err)
	}
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{"whatsapp_instances", "webhook_replays"} {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil || !ok {
			t.Errorf("table %s missing after migrate (err %v)", table, err)
		}
	}
}
