package ingress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/internal/brokertest"
	"github.com/olp-edu/borda/webhook/publish"
)

// Fault tests against the real RabbitMQ (docs/reliability.md). In each:
// every 200 PUBLISHED_CONFIRMED is in the queue, no request takes longer
// than confirm_timeout + 1 s, and the ingress is ready again within 10 s
// after the fault clears. Nothing sleeps for time to pass: each step waits
// for what it needs (answers confirmed, a fault answered, readiness) with
// a deadline.

const faultConfirmTimeout = 2 * time.Second

func faultConfig(t *testing.T) stackConfig {
	cfg := testConfig(t)
	cfg.Publisher.ConfirmTimeout = faultConfirmTimeout
	return cfg
}

// withProxy puts an in-process toxiproxy between the publisher and the
// broker and returns it; cfg's broker URL points at it.
func withProxy(t *testing.T, cfg *stackConfig) *toxiproxy.Proxy {
	t.Helper()
	p, u := brokertest.Proxy(t, cfg.Publisher.URL)
	cfg.Publisher.URL = u
	return p
}

// load posts distinct events from workers until stop closes, and records
// every answer.
type load struct {
	mu        sync.Mutex
	confirmed []string // event ids answered 200 PUBLISHED_CONFIRMED
	statuses  map[string]int
	slowest   time.Duration
	seq       atomic.Int64
	wg        sync.WaitGroup
	stop      chan struct{}
}

func startLoad(t *testing.T, s *stack, workers int) *load {
	l := &load{statuses: map[string]int{}, stop: make(chan struct{})}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				id := fmt.Sprintf("evt-%d", l.seq.Add(1))
				body := fmt.Sprintf(`{"instance":"i","event":"messages.upsert","data":{"key":{"id":%q}}}`, id)
				code, a, took := s.post(t, "/webhooks/whatsapp", "application/json", []byte(body), nil)
				l.mu.Lock()
				l.statuses[fmt.Sprintf("%d %s %s", code, a.Status, a.Reason)]++
				if a.Status == StatusPublishedConfirmed {
					l.confirmed = append(l.confirmed, bindBody("i:messages.upsert:"+id, []byte(body))) // a token source: the id is bound to the body
				}
				l.slowest = max(l.slowest, took)
				l.mu.Unlock()
				if code != 200 {
					time.Sleep(5 * time.Millisecond) // a provider backs off a little
				}
			}
		}()
	}
	return l
}

// waitConfirmed waits until n more requests than now have been answered
// 200 PUBLISHED_CONFIRMED (at most 10 s).
func (l *load) waitConfirmed(t *testing.T, n int) {
	t.Helper()
	want := l.confirmedCount() + n
	brokertest.Eventually(t, 10*time.Second, fmt.Sprintf("%d answers confirmed", want), func() bool { return l.confirmedCount() >= want })
}

func (l *load) confirmedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.confirmed)
}

// waitAnswer waits until some answer's "code status reason" contains
// what (at most 10 s).
func (l *load) waitAnswer(t *testing.T, what string) {
	t.Helper()
	brokertest.Eventually(t, 10*time.Second, "an answer "+what, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for k := range l.statuses {
			if strings.Contains(k, what) {
				return true
			}
		}
		return false
	})
}

func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

// check asserts the invariants of every fault test.
func (l *load) check(t *testing.T, s *stack, wantFault string) {
	t.Helper()
	t.Logf("answers: %v; slowest %s", l.statuses, l.slowest)
	if limit := faultConfirmTimeout + time.Second; l.slowest > limit {
		t.Errorf("slowest answer took %s, want ≤ confirm_timeout + 1s = %s", l.slowest, limit)
	}
	faulted := false
	for k := range l.statuses {
		if strings.Contains(k, wantFault) {
			faulted = true
		}
	}
	if !faulted {
		t.Errorf("no answer with %s: the fault did not bite", wantFault)
	}
	got := s.envelopes(t)
	for _, id := range l.confirmed {
		if _, ok := got[id]; !ok {
			t.Errorf("event %s was answered 200 but is not in the queue", id)
		}
	}
	if len(l.confirmed) == 0 {
		t.Error("no request was confirmed")
	}
}

// readyAgain waits ≤ 10 s for readiness, then checks one delivery gets 200.
func readyAgain(t *testing.T, s *stack) {
	t.Helper()
	waitReady(t, s.pub, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, a, _ := s.post(t, "/webhooks/whatsapp", "application/json", []byte(fmt.Sprintf(`{"after":%d}`, time.Now().UnixNano())), nil)
		if code == 200 && a.Status == StatusPublishedConfirmed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not publishing 10 s after the fault cleared: %d %+v", code, a)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The TCP connection is cut mid-load (and refused for a while):
// outstanding confirms fail at once, the publisher reconnects with backoff
// and redeclares.
func TestConnectionCutMidLoadFailsAtOnceThenReconnects(t *testing.T) {
	t.Parallel()
	cfg := faultConfig(t)
	proxy := withProxy(t, &cfg)
	s := newStack(t, cfg)
	l := startLoad(t, s, 16)
	l.waitConfirmed(t, 20)
	proxy.Stop() // closes every connection and the listener
	l.waitAnswer(t, "503 SERVICE_UNAVAILABLE "+ReasonBrokerUnavailable)
	if err := s.pub.Ready(); !errors.Is(err, publish.ErrBrokerUnavailable) {
		t.Errorf("Ready during the cut = %v, want publish.ErrBrokerUnavailable", err)
	}
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	readyAgain(t, s)
	l.waitConfirmed(t, 10) // the load flows again
	l.finish()
	l.check(t, s, ReasonBrokerUnavailable)
}

// RabbitMQ closes the connection (rabbitmqctl close_connection), found
// by the client-provided name: the publisher reconnects.
func TestBrokerClosingTheConnectionIsSurvived(t *testing.T) {
	t.Parallel()
	cfg := faultConfig(t)
	name := servicetest.Name(t)
	cfg.Publisher.ConnectionName = name
	s := newStack(t, cfg)
	pid := brokertest.ConnectionPID(t, name)
	if n := s.reconnects(t); n != 0 {
		t.Fatalf("reconnects before the fault = %v", n)
	}
	l := startLoad(t, s, 16)
	l.waitConfirmed(t, 20)
	brokertest.Rabbitmqctl(t, "close_connection", pid, "borda fault test")
	readyAgain(t, s)
	l.waitConfirmed(t, 10) // the load flows again
	l.finish()
	l.check(t, s, ReasonBrokerUnavailable)
	if s.reconnects(t) < 1 { // ready again with a reconnect counted: on a new connection
		t.Error("still on the connection the broker closed")
	}
}

// Confirms stop arriving (the broker's answers are held on the wire).
// Every request answers 503 by its deadline, none hangs, the in-flight cap
// sheds the excess at once, and it recovers when the answers flow again.
func TestStalledConfirmsNeverHang(t *testing.T) {
	t.Parallel()
	cfg := faultConfig(t)
	cfg.Publisher.MaxInFlight = 64
	proxy := withProxy(t, &cfg)
	s := newStack(t, cfg)
	l := startLoad(t, s, 8)
	l.waitConfirmed(t, 20)
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"stall","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)); err != nil {
		t.Fatal(err)
	}
	// 200 concurrent webhooks while nothing is confirmed.
	var wg sync.WaitGroup
	var slowest atomic.Int64
	var timeouts atomic.Int64
	for n := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, a, took := s.post(t, "/webhooks/whatsapp", "application/json", []byte(fmt.Sprintf(`{"burst":%d}`, n)), nil)
			if code == 200 {
				t.Errorf("burst %d answered 200 while confirms are stalled", n)
			}
			if a.Reason == ReasonConfirmTimeout {
				timeouts.Add(1)
			}
			for old := slowest.Load(); int64(took) > old && !slowest.CompareAndSwap(old, int64(took)); old = slowest.Load() {
			}
		}()
	}
	wg.Wait()
	if d := time.Duration(slowest.Load()); d > faultConfirmTimeout+time.Second {
		t.Errorf("slowest stalled answer %s, want ≤ %s", d, faultConfirmTimeout+time.Second)
	}
	brokertest.WaitNotReady(t, s.pub, 2*faultConfirmTimeout) // readiness reports the stall
	if err := proxy.Toxics.RemoveToxic(context.Background(), "stall"); err != nil {
		t.Fatal(err)
	}
	readyAgain(t, s)
	l.finish()
	l.check(t, s, ReasonConfirmTimeout)
}

// A partition with TCP kept up: nothing comes back from the broker
// (heartbeats would need 2-3 intervals to notice). Readiness fails once a
// confirm is older than confirm_timeout, the connection is recycled after
// 3 × confirm_timeout, and publishing resumes when the path heals.
func TestHalfOpenConnectionIsRecycled(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Publisher.ConfirmTimeout = time.Second
	proxy := withProxy(t, &cfg)
	s := newStack(t, cfg)
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"partition","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)); err != nil {
		t.Fatal(err)
	}
	// The partition lasts until the toxic is removed below: the answer
	// arrives while it lasts, and its reason says the confirm timed out.
	code, a, took := s.post(t, "/webhooks/whatsapp", "application/json", []byte(`{"partitioned":1}`), nil)
	if code != 503 || a.Reason != ReasonConfirmTimeout {
		t.Errorf("during the partition: %d %+v after %s, want 503 CONFIRM_TIMEOUT", code, a, took)
	}
	brokertest.WaitNotReady(t, s.pub, 2*time.Second)
	// Stalls are looked for every 5 s (the publisher's topology interval).
	brokertest.Eventually(t, 3*time.Second+5*time.Second+2*time.Second, "the stalled connection recycled",
		func() bool { return s.reconnects(t) >= 1 })
	if err := proxy.Toxics.RemoveToxic(context.Background(), "partition"); err != nil {
		t.Fatal(err)
	}
	readyAgain(t, s)
	if s.reconnects(t) < 1 { // ready again with a reconnect counted: on a new connection
		t.Error("still on the half-open connection")
	}
}

// A memory alarm blocks the connection: 503 BROKER_BLOCKED at once
// without publishing, readiness fails, and both recover on unblock.
// The alarm blocks every publisher on the node, so the test runs on a
// private node of its own (never the shared broker).
func TestBlockedConnectionAnswers503AtOnce(t *testing.T) {
	node := servicetest.PrivateBrokerAlone(t)
	cfg := faultConfig(t)
	s := newStack(t, cfg)
	if code, _, _ := s.post(t, "/webhooks/whatsapp", "application/json", []byte(`{"before":1}`), nil); code != 200 {
		t.Fatalf("before the alarm: %d", code)
	}
	clearAlarm := servicetest.MemoryAlarm(t, node)
	// RabbitMQ blocks a connection when it next publishes: the request
	// that does so answers 503 (BROKER_BLOCKED as the notice arrives, or
	// CONFIRM_TIMEOUT) while the alarm lasts.
	code, a, took := s.post(t, "/webhooks/whatsapp", "application/json", []byte(`{"trigger":1}`), nil)
	if code != 503 {
		t.Errorf("publishing into the alarm: %d %+v after %s, want 503", code, a, took)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !errors.Is(s.pub.Ready(), publish.ErrBrokerBlocked) {
		if time.Now().After(deadline) {
			t.Fatalf("Ready = %v 10 s into the alarm, want publish.ErrBrokerBlocked", s.pub.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := s.admin.Count(cfg.Publisher.Topology.ForwardQueue)
	// "At once": the reason is BROKER_BLOCKED, not CONFIRM_TIMEOUT (a
	// publish that waited for its confirm), and none of the five reaches
	// the queue (counted below).
	for n := range 5 {
		code, a, took := s.post(t, "/webhooks/whatsapp", "application/json", []byte(fmt.Sprintf(`{"blocked":%d}`, n)), nil)
		if code != 503 || a.Reason != ReasonBrokerBlocked {
			t.Errorf("while blocked: %d %+v after %s, want 503 BROKER_BLOCKED", code, a, took)
		}
	}
	clearAlarm()
	readyAgain(t, s)
	// The trigger may be stored once the alarm clears (the provider's
	// retry then duplicates it; consumers dedupe by id); the five
	// refused while blocked never are.
	if got := s.admin.Count(cfg.Publisher.Topology.ForwardQueue); got < before+1 || got > before+2 {
		t.Errorf("queue holds %d, want %d or %d (nothing published while blocked)", got, before+1, before+2)
	}
}

// Under load, a routing key no queue binds is returned then acked; not
// one such request is answered 200.
func TestUnroutableUnderLoadNeverAnswered200(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Publisher.ConfirmTimeout = 10 * time.Second // no deadline at stake here, only the answer
	cfg.addSources([]Source{{Name: "unbound", Path: "/webhooks/unbound", RoutingKey: "webhook.unknown"}}...)
	s := newStack(t, cfg)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	for n := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target := "/webhooks/unbound"
			if n%3 == 0 {
				target = "/webhooks/whatsapp"
			}
			code, a, _ := s.post(t, target, "application/json", []byte(fmt.Sprintf(`{"n":%d}`, n)), nil)
			mu.Lock()
			statuses[fmt.Sprintf("%s %d %s", target, code, a.Reason)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if statuses["/webhooks/unbound 503 UNROUTABLE_MESSAGE"] != 200 || statuses["/webhooks/whatsapp 200 "] != 100 {
		t.Fatalf("answers = %v; want 200 unroutable 503s and 100 confirmed", statuses)
	}
	if got := s.admin.Count(cfg.Publisher.Topology.ForwardQueue); got != 100 {
		t.Fatalf("forward queue holds %d, want 100", got)
	}
}

// With its queues deleted, no queue is bound: the return answers 503
// UNROUTABLE_MESSAGE; the publisher redeclares its topology and is
// publishing again within 10 s.
func TestDeletedQueueIsUnroutableThenRedeclared(t *testing.T) {
	t.Parallel()
	cfg := faultConfig(t)
	s := newStack(t, cfg)
	ch := s.admin.Channel()
	for _, q := range []string{cfg.Publisher.Topology.ForwardQueue, cfg.Publisher.Topology.EventsQueue} {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			t.Fatalf("deleting %s: %v", q, err)
		}
	}
	ch.Close()
	code, a, _ := s.post(t, "/webhooks/whatsapp", "application/json", []byte(`{"deleted":1}`), nil)
	if code != 503 || a.Reason != ReasonUnroutable {
		t.Fatalf("with the queues deleted: %d %+v, want 503 UNROUTABLE_MESSAGE", code, a)
	}
	readyAgain(t, s)
	if got := s.admin.Count(cfg.Publisher.Topology.ForwardQueue); got != 1 {
		t.Fatalf("forward queue holds %d, want 1", got)
	}
}
