package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/servicetest"
)

// Fault tests against the real RabbitMQ (docs/reliability.md, "Fault bench"). In
// each: every 200 PUBLISHED_CONFIRMED is in the queue, no request takes
// longer than confirm_timeout + 1 s, and the ingress is ready again within
// 10 s after the fault clears.

const faultConfirmTimeout = 2 * time.Second

func faultConfig(t *testing.T) configs.Config {
	cfg := testConfig(t)
	cfg.Webhook.ConfirmTimeout = configs.Duration(faultConfirmTimeout)
	return cfg
}

// withProxy puts an in-process toxiproxy between the publisher and the
// broker and returns it; cfg's AMQP URL points at it.
func withProxy(t *testing.T, cfg *configs.Config) *toxiproxy.Proxy {
	t.Helper()
	u, err := url.Parse(cfg.AMQP.URL.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(srv, servicetest.Name(t), "127.0.0.1:0", u.Host)
	if err := proxy.Start(); err != nil {
		t.Fatalf("starting fault proxy: %v", err)
	}
	t.Cleanup(proxy.Stop)
	u.Host = proxy.Listen
	cfg.AMQP.URL = configs.Secret(u.String())
	return proxy
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
					l.confirmed = append(l.confirmed, "i:messages.upsert:"+id)
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

// Row 29: the TCP connection is cut mid-load (and refused for a while);
// outstanding confirms fail at once, the publisher reconnects with
// backoff and redeclares.
func TestEdgeCase29_ConnectionCutMidLoad(t *testing.T) {
	t.Parallel()
	cfg := faultConfig(t)
	proxy := withProxy(t, &cfg)
	s := newStack(t, cfg)
	l := startLoad(t, s, 16)
	time.Sleep(400 * time.Millisecond)
	proxy.Stop() // closes every connection and the listener
	time.Sleep(700 * time.Millisecond)
	if err := s.pub.Ready(); !errors.Is(err, ErrBrokerUnavailable) {
		t.Errorf("Ready during the cut = %v, want ErrBrokerUnavailable", err)
	}
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	readyAgain(t, s)
	time.Sleep(200 * time.Millisecond)
	l.finish()
	l.check(t, s, ReasonBrokerUnavailable)
}

// Row 29 (broker side): RabbitMQ closes the connection
// (rabbitmqctl close_connection), found by the client-provided name.
func TestEdgeCase29_BrokerClosesConnection(t *testing.T) {
	t.Parallel()
	cfg := faultConfig(t)
	name := servicetest.Name(t)
	s := newStack(t, cfg, WithConnectionName(name))
	pid := connectionPID(t, name)
	s.pub.mu.RLock()
	first := s.pub.conn
	s.pub.mu.RUnlock()
	l := startLoad(t, s, 16)
	time.Sleep(300 * time.Millisecond)
	rabbitmqctl(t, "close_connection", pid, "borda fault test")
	readyAgain(t, s)
	time.Sleep(200 * time.Millisecond)
	l.finish()
	l.check(t, s, ReasonBrokerUnavailable)
	s.pub.mu.RLock()
	second := s.pub.conn
	s.pub.mu.RUnlock()
	if second == first {
		t.Error("still on the connection the broker closed")
	}
}

// Row 25: confirms stop arriving (the broker's answers are held on the
// wire). Every request answers 503 by its deadline, none hangs, the
// in-flight cap sheds the excess at once, and it recovers when the
// answers flow again.
func TestEdgeCase25_StalledConfirmsNeverHang(t *testing.T) {
	t.Parallel()
	cfg := faultConfig(t)
	cfg.Webhook.MaxInFlight = 64
	proxy := withProxy(t, &cfg)
	s := newStack(t, cfg)
	l := startLoad(t, s, 8)
	time.Sleep(300 * time.Millisecond)
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
	waitNotReady(t, s.pub, 2*faultConfirmTimeout) // readiness reports the stall
	if err := proxy.Toxics.RemoveToxic(context.Background(), "stall"); err != nil {
		t.Fatal(err)
	}
	readyAgain(t, s)
	l.finish()
	l.check(t, s, ReasonConfirmTimeout)
}

// Row 29, partition with TCP kept up: nothing comes back from the broker
// (heartbeats would need 2-3 intervals to notice). Readiness fails once a
// confirm is older than confirm_timeout, the connection is recycled after
// 3 × confirm_timeout, and publishing resumes when the path heals.
func TestEdgeCase29_HalfOpenConnectionIsRecycled(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Webhook.ConfirmTimeout = configs.Duration(time.Second)
	proxy := withProxy(t, &cfg)
	s := newStack(t, cfg)
	s.pub.mu.RLock()
	first := s.pub.conn
	s.pub.mu.RUnlock()
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"partition","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)); err != nil {
		t.Fatal(err)
	}
	code, a, took := s.post(t, "/webhooks/whatsapp", "application/json", []byte(`{"partitioned":1}`), nil)
	if code != 503 || a.Reason != ReasonConfirmTimeout || took > 2*time.Second {
		t.Errorf("during the partition: %d %+v after %s, want 503 CONFIRM_TIMEOUT within 2 s", code, a, took)
	}
	waitNotReady(t, s.pub, 2*time.Second)
	deadline := time.Now().Add(3*time.Second + topologyEvery + 2*time.Second)
	for value(t, s.pub.metrics.reconnects) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled connection was not recycled")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := proxy.Toxics.RemoveToxic(context.Background(), "partition"); err != nil {
		t.Fatal(err)
	}
	readyAgain(t, s)
	s.pub.mu.RLock()
	defer s.pub.mu.RUnlock()
	if s.pub.conn == first {
		t.Error("still on the half-open connection")
	}
}

func waitNotReady(t *testing.T, p *Publisher, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for p.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("still ready %s into the stall", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Row 26: a memory alarm blocks the connection: 503 BROKER_BLOCKED at
// once without publishing, readiness fails, and both recover on unblock.
// The alarm blocks every publisher on the broker, so this test is not
// parallel: Go runs it before the parallel tests of this package start.
func TestEdgeCase26_ConnectionBlockedAnswers503AtOnce(t *testing.T) {
	cfg := faultConfig(t)
	// The memory alarm blocks every publisher on the shared broker: wait
	// until no other test is publishing, and keep them out until restored.
	servicetest.BrokerAlarm(t)
	s := newStack(t, cfg)
	if code, _, _ := s.post(t, "/webhooks/whatsapp", "application/json", []byte(`{"before":1}`), nil); code != 200 {
		t.Fatalf("before the alarm: %d", code)
	}
	clearAlarm := servicetest.MemoryAlarm(t)
	// RabbitMQ blocks a connection when it next publishes: the request
	// that does so answers 503 (BROKER_BLOCKED as the notice arrives)
	// within its deadline.
	code, a, took := s.post(t, "/webhooks/whatsapp", "application/json", []byte(`{"trigger":1}`), nil)
	if code != 503 || took > faultConfirmTimeout+time.Second {
		t.Errorf("publishing into the alarm: %d %+v after %s, want 503", code, a, took)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !errors.Is(s.pub.Ready(), ErrBrokerBlocked) {
		if time.Now().After(deadline) {
			t.Fatalf("Ready = %v 10 s into the alarm, want ErrBrokerBlocked", s.pub.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := s.admin.count(cfg.Forward.Queue)
	for n := range 5 {
		code, a, took := s.post(t, "/webhooks/whatsapp", "application/json", []byte(fmt.Sprintf(`{"blocked":%d}`, n)), nil)
		if code != 503 || a.Reason != ReasonBrokerBlocked || took > 500*time.Millisecond {
			t.Errorf("while blocked: %d %+v after %s, want 503 BROKER_BLOCKED at once", code, a, took)
		}
	}
	clearAlarm()
	readyAgain(t, s)
	// The trigger may be stored once the alarm clears (the provider's
	// retry then duplicates it; consumers dedupe by id); the five
	// refused while blocked never are.
	if got := s.admin.count(cfg.Forward.Queue); got < before+1 || got > before+2 {
		t.Errorf("queue holds %d, want %d or %d (nothing published while blocked)", got, before+1, before+2)
	}
}

// Row 27 under load: a routing key no queue binds is returned then acked;
// not one such request is answered 200.
func TestEdgeCase27_UnroutableUnderLoadNeverAnswered200(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Webhook.ConfirmTimeout = configs.Duration(10 * time.Second) // no deadline at stake here, only the answer
	cfg.Webhook.Sources = []configs.WebhookSource{{Name: "unbound", Path: "/webhooks/unbound", RoutingKey: "webhook.unknown"}}
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
	if got := s.admin.count(cfg.Forward.Queue); got != 100 {
		t.Fatalf("forward queue holds %d, want 100", got)
	}
}

// Row 27, queue deleted: with no queue bound, the return answers 503
// UNROUTABLE_MESSAGE; the publisher redeclares its topology and is
// publishing again within 10 s.
func TestEdgeCase27_QueueDeletedIsUnroutableThenRedeclared(t *testing.T) {
	t.Parallel()
	cfg := faultConfig(t)
	s := newStack(t, cfg)
	ch := s.admin.channel()
	for _, q := range []string{cfg.Forward.Queue, cfg.Forward.EventsQueue} {
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
	if got := s.admin.count(cfg.Forward.Queue); got != 1 {
		t.Fatalf("forward queue holds %d, want 1", got)
	}
}

func rabbitmqctl(t *testing.T, args ...string) string {
	t.Helper()
	servicetest.AMQPURL(t)
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		if servicetest.Required() {
			t.Fatalf("rabbitmqctl not found: %v", err)
		}
		t.Skip("rabbitmqctl not found")
	}
	out, err := servicetest.Rabbitmqctl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// connectionPID finds the broker's pid of the connection named name.
func connectionPID(t *testing.T, name string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := rabbitmqctl(t, "list_connections", "--no-table-headers", "pid", "client_properties")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"`+name+`"`) {
				return strings.Fields(line)[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no broker connection named %s:\n%s", name, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
