package instances

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/topology"
)

// connectionUpdate is an Evolution connection.update body; data is the
// JSON of its data object.
func connectionUpdate(instance, data string, at time.Time) string {
	name, _ := json.Marshal(instance) // JSON's escapes: a NUL is \u0000
	return fmt.Sprintf(`{"event":"connection.update","instance":%s,"data":%s,"date_time":%q}`, name, data, at.UTC().Format(time.RFC3339Nano))
}

// TestParseRefusesValuesTheTableCannotHold: every value whatsapp_instances
// cannot hold is malformed at Parse (a NUL, an over-long name or state), and
// a statusReason outside PostgreSQL's integer is dropped, not sent: a
// statusReason of 3 000 000 000 made every upsert fail and the consumer held
// the delivery for ever (fresh attack pass A020).
func TestParseRefusesValuesTheTableCannotHold(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, instance, data string
		malformed            bool
		reason               *int
	}{
		{"NUL in the instance", "nul\u0000x", `{"state":"open"}`, true, nil},
		{"NUL alone", "\u0000", `{"state":"open"}`, true, nil},
		{"NUL in the state", "i", `{"state":"op\u0000en"}`, true, nil},
		{"instance of 257 bytes", strings.Repeat("a", 257), `{"state":"open"}`, true, nil},
		{"instance of 256 bytes", strings.Repeat("a", 256), `{"state":"open"}`, false, nil},
		{"state of 65 bytes", "i", `{"state":"` + strings.Repeat("s", 65) + `"}`, true, nil},
		{"state of 64 bytes", "i", `{"state":"` + strings.Repeat("s", 64) + `"}`, false, nil},
		{"reason past int32", "i", `{"state":"open","statusReason":3000000000}`, false, nil},
		{"reason just past int32", "i", `{"state":"open","statusReason":2147483648}`, false, nil},
		{"reason below int32", "i", `{"state":"open","statusReason":-2147483649}`, false, nil},
		{"reason past int64", "i", `{"state":"open","statusReason":99999999999999999999}`, false, nil},
		{"reason as a float", "i", `{"state":"open","statusReason":1e3}`, false, nil},
		{"reason as a string", "i", `{"state":"open","statusReason":"401"}`, false, nil},
		{"largest int32 reason", "i", `{"state":"open","statusReason":2147483647}`, false, ptr(2147483647)},
		{"smallest int32 reason", "i", `{"state":"open","statusReason":-2147483648}`, false, ptr(-2147483648)},
		{"logout", "i", `{"state":"close","statusReason":401}`, false, ptr(401)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, ok, err := Parse("application/json", []byte(connectionUpdate(tc.instance, tc.data, at)))
			if !ok {
				t.Fatal("not read as a connection.update")
			}
			if tc.malformed {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if (u.Reason == nil) != (tc.reason == nil) || (u.Reason != nil && *u.Reason != *tc.reason) {
				t.Fatalf("Reason = %v, want %v", deref(u.Reason), deref(tc.reason))
			}
		})
	}
}

func ptr(i int) *int { return &i }

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestConsumer_PoisonEventDoesNotStallOtherInstances: an accepted event
// the database can never store is acknowledged as malformed, and the
// genuine events behind it are applied; before, the consumer took it for a
// database outage and held it for ever, stalling every instance (fresh
// attack pass A020). Three members of the class: a value Parse refuses (a
// NUL in the name), a value PostgreSQL refuses by its data (a CHECK
// constraint: SQLSTATE class 23), and a refusal of another kind for that
// row alone (a trigger raising P0001), told from an outage by the canary
// upsert (Store.Accepts).
func TestConsumer_PoisonEventDoesNotStallOtherInstances(t *testing.T) {
	amqpURL := servicetest.AMQPURL(t)
	pool := testPool(t)
	ctx := context.Background()
	for _, ddl := range []string{
		`ALTER TABLE whatsapp_instances ADD CONSTRAINT test_no_poison CHECK (instance NOT LIKE '%-check-poison')`,
		`CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN IF NEW.instance LIKE '%-trigger-poison' THEN RAISE EXCEPTION 'refused by the test trigger'; END IF; RETURN NEW; END $$`,
		`CREATE TRIGGER test_refuse BEFORE INSERT OR UPDATE ON whatsapp_instances FOR EACH ROW EXECUTE FUNCTION test_refuse()`,
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	name := servicetest.Name(t)
	top := topology.Topology{
		Exchange: name + "-ex", RoutingKey: name + ".fwd",
		ForwardQueue: name + "-fwd", DLQ: name + "-dlq", EventsQueue: name + "-events",
		EventsBinding: name + ".#",
		Retry:         []topology.Delay{{Name: "1s", TTL: time.Second}}, QueueType: topology.Quorum,
		RetryExchange: name + "-retry", DLXExchange: name + "-dlx",
	}
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
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
	c, err := New(Options{AMQPURL: amqpURL, Queue: top.EventsQueue, DB: pool, Prefetch: 20, Reconnect: 20 * time.Millisecond, MaxHold: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	publish := func(i int, body string) {
		t.Helper()
		env := envelope.New(fmt.Sprintf("%s-%d", name, i), "evolution", "application/json", nil, []byte(body), time.Now())
		b, _ := env.Encode()
		if err := ch.PublishWithContext(ctx, top.Exchange, top.RoutingKey, false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, MessageId: env.ID, ContentType: envelope.ContentType, Body: b,
		}); err != nil {
			t.Fatal(err)
		}
	}
	poisons := []string{
		connectionUpdate(name+"-nul\u0000x", `{"state":"open"}`, time.Now()),
		connectionUpdate(name+"-check-poison", `{"state":"open"}`, time.Now()),
		connectionUpdate(name+"-trigger-poison", `{"state":"open"}`, time.Now()),
	}
	var victims []string
	for i, p := range poisons {
		publish(2*i, p)
		victim := fmt.Sprintf("%s-victim-%d", name, i)
		victims = append(victims, victim)
		publish(2*i+1, connectionUpdate(victim, `{"state":"close","statusReason":401}`, time.Now()))
	}
	deadline := time.Now().Add(20 * time.Second)
	for value(c, "applied") < float64(len(victims)) || value(c, "malformed") < float64(len(poisons)) {
		if time.Now().After(deadline) {
			t.Fatalf("within 20 s: %v applied (want %d), %v malformed (want %d); readiness %v",
				value(c, "applied"), len(victims), value(c, "malformed"), len(poisons), c.Readiness())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, v := range victims {
		if s := readState(t, pool, v); s.state != "close" {
			t.Errorf("victim %s stored %+v, want close", v, s)
		}
	}
	if r := c.Readiness(); len(r) != 0 {
		t.Errorf("readiness %v after the poison was acknowledged, want ready", r)
	}
}

// TestStore_AcceptsFailsWhileTheTableCannotBeWritten: the canary that
// tells poison from an outage fails when the database cannot take any
// update (the table missing: `borda migrate` not run), so a consumer in
// front of it keeps holding its events instead of acknowledging them as
// malformed.
func TestStore_AcceptsFailsWhileTheTableCannotBeWritten(t *testing.T) {
	pool, _ := servicetest.IsolatedDatabase(t) // not migrated
	if err := NewStore(pool).Accepts(context.Background()); err == nil {
		t.Fatal("Accepts = nil on a database without whatsapp_instances")
	}
	migrated := testPool(t)
	if err := NewStore(migrated).Accepts(context.Background()); err != nil {
		t.Fatalf("Accepts on a migrated database: %v", err)
	}
	var n int
	if err := migrated.QueryRow(context.Background(), `SELECT count(*) FROM whatsapp_instances`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the canary left %d rows (err %v), want none", n, err)
	}
}
