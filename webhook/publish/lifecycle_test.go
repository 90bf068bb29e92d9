package publish

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/startstop"
	"github.com/olp-edu/borda/internal/startstop/startstoptest"
	"github.com/olp-edu/borda/webhook/internal/brokertest"
)

// logTape records log lines for assertions.
type logTape struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logTape) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logTape) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Stop right after Start (what `borda serve` did when the ingress could
// not be built) stopped nothing: the background session kept dialing,
// declaring and opening channels on a slow broker, logged "webhook broker
// connected" after Stop was called, and Stop waited for all of it,
// ignoring its ctx. Stop must end the connect loop at once and leave no
// connection behind.
func TestStopEndsTheConnectLoop(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	proxy := withProxy(t, &cfg)
	// Every broker answer takes 300 ms: the handshake, the topology and
	// the channels take several seconds to set up.
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":300}}`)); err != nil {
		t.Fatal(err)
	}
	var brokerSpoke <-chan struct{}
	cfg.URL, brokerSpoke = firstFrameRelay(t, cfg.URL)
	name := servicetest.Name(t)
	tape := &logTape{}
	logger := slog.New(slog.NewTextHandler(tape, nil))
	reg := prometheus.NewRegistry()
	cfg.ConnectionName, cfg.Logger, cfg.Registerer = name, logger, reg
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Mid-handshake: the broker's first frame (connection.start) reached
	// the publisher, and the session is not set up yet.
	select {
	case <-brokerSpoke:
	case <-time.After(10 * time.Second):
		t.Fatal("no broker frame reached the publisher within 10 s")
	}
	if strings.Contains(tape.String(), "webhook broker connected") {
		t.Fatalf("the session was set up before Stop was called: the test stops nothing mid-handshake:\n%s", tape.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_ = p.Stop(ctx)
	took := time.Since(start)
	if limit := time.Second + closeTimeout + 500*time.Millisecond; took > limit {
		t.Errorf("Stop took %s, want ≤ %s (its ctx plus the close handshake)", took, limit)
	}
	if strings.Contains(tape.String(), "webhook broker connected") {
		t.Errorf("the publisher connected after Stop was called:\n%s", tape.String())
	}
	if v := value(t, p.metrics.connected); v != 0 {
		t.Errorf("borda_webhook_broker_connected = %v after Stop, want 0", v)
	}
	deadline := time.Now().Add(3 * time.Second)
	for strings.Contains(brokertest.Rabbitmqctl(t, "list_connections", "--no-table-headers", "client_properties"), `"`+name+`"`) {
		if time.Now().After(deadline) {
			t.Fatalf("broker connection %s still open 3 s after Stop returned", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// firstFrameRelay relays TCP to the broker at amqpURL and returns the URL
// that goes through it, with a channel closed when the first byte from
// the broker reaches the client: the handshake is then under way.
func firstFrameRelay(t *testing.T, amqpURL string) (string, <-chan struct{}) {
	t.Helper()
	u, err := url.Parse(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	spoke := make(chan struct{})
	var once sync.Once
	target := u.Host
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer b.Close()
				go func() { _, _ = io.Copy(b, c); b.Close() }()
				buf := make([]byte, 32<<10)
				for {
					n, err := b.Read(buf)
					if n > 0 {
						once.Do(func() { close(spoke) })
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	u.Host = ln.Addr().String()
	return u.String(), spoke
}

// A publish whose socket write cannot complete (the broker stopped reading:
// a memory alarm, flow control, a stalled link) blocked inside amqp091-go's
// Publish, which ignores its ctx once writing, so the request hung until
// the connection was recycled (or the alarm cleared). It must answer by
// confirm_timeout.
func TestPublishAnswersByItsDeadlineWhenTheSocketWriteBlocks(t *testing.T) {
	t.Parallel()
	cfg := testOptions(t)
	cfg.ConfirmTimeout = time.Second
	proxy := withProxy(t, &cfg)
	p := newTestPublisher(t, cfg)
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"trickle","type":"bandwidth","stream":"upstream","attributes":{"rate":1}}`)); err != nil {
		t.Fatal(err)
	}
	// The stall ends by itself 30 × confirm_timeout later: a Publish that
	// waits for the socket answers only after that, so the assertion is
	// "answered while the stall lasted", not a measured duration (the
	// machine's load cannot fail it).
	var healed atomic.Bool
	heal := sync.OnceFunc(func() {
		healed.Store(true)
		if err := proxy.Toxics.RemoveToxic(context.Background(), "trickle"); err != nil {
			t.Error(err)
		}
	})
	timer := time.AfterFunc(30*cfg.ConfirmTimeout, heal)
	defer timer.Stop()
	big := bytes.Repeat([]byte("x"), 8<<20) // more than every socket buffer on the way
	err := p.Publish(context.Background(), Message{ID: "big", Body: big})
	stalled := !healed.Load()
	heal()
	if err == nil {
		t.Fatal("Publish = nil while the broker could not read it")
	}
	if !stalled {
		t.Errorf("Publish answered %v only after the stall ended (30 × confirm_timeout): it waited on the socket", err)
	}
	brokertest.WaitReady(t, p, 15*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.Publish(context.Background(), Message{ID: "after", Body: []byte(`{}`)})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 10 s after the link healed: %v", err)
		}
		if !errors.Is(err, ErrBrokerUnavailable) && !errors.Is(err, ErrConfirmTimeout) {
			t.Fatalf("Publish after the link healed = %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A memory alarm met by a large body: the publish that meets the alarm is
// still being written when RabbitMQ stops reading the socket, and
// amqp091-go's write ignores ctx, so the request hung for as long as the
// alarm lasted. It must answer by confirm_timeout.
func TestLargeBodyIntoAMemoryAlarmAnswersByTheDeadline(t *testing.T) {
	// The alarm is node-wide: on a node of this test's own, never the
	// shared broker.
	node := servicetest.PrivateBrokerAlone(t)
	cfg := testOptions(t)
	p := newTestPublisher(t, cfg)
	// The alarm is cleared after a fixed time, whether or not the publish
	// has answered: a hanging publish must not keep the node alarmed.
	// The assertion is "answered while the alarm lasted" (the alarm lasts
	// 15 × confirm_timeout unless the publish answers first), not a
	// measured duration: CI's load once made a correct answer take 3.3 s
	// against a 3 s bound.
	clear := servicetest.MemoryAlarm(t, node)
	var cleared atomic.Bool
	restore := sync.OnceFunc(func() { cleared.Store(true); clear() })
	timer := time.AfterFunc(15*faultConfirmTimeout, restore)
	defer timer.Stop()
	big := bytes.Repeat([]byte("x"), 12<<20) // a 9 MB body's envelope
	err := p.Publish(context.Background(), Message{ID: "big", Body: big})
	duringAlarm := !cleared.Load()
	restore()
	if err == nil || !duringAlarm {
		t.Errorf("a large message into the alarm: %v (answered while the alarm lasted: %v), want an error before the alarm ends", err, duringAlarm)
	}
	brokertest.WaitReady(t, p, 10*time.Second)
	if err := p.Publish(context.Background(), Message{ID: "after", Body: []byte(`{}`)}); err != nil {
		t.Errorf("Publish after the alarm cleared = %v", err)
	}
}

// Stop without Start returns at once, as does a second Stop; a Start after
// Stop is refused, and publishing before Start or after Stop answers
// unavailable without touching a broker.
func TestPublisherStopWithoutStartAndTwiceIsHarmless(t *testing.T) {
	t.Parallel()
	p, err := New(Options{URL: "amqp://guest:guest@127.0.0.1:1/", ConfirmTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(context.Background(), Message{ID: "early", Body: []byte(`{}`)}); !errors.Is(err, ErrBrokerUnavailable) {
		t.Fatalf("Publish before Start = %v, want ErrBrokerUnavailable", err)
	}
	for i := range 2 {
		if err := p.Stop(context.Background()); err != nil {
			t.Fatalf("Stop #%d without Start = %v", i+1, err)
		}
	}
	if err := p.Start(context.Background()); !errors.Is(err, startstop.ErrStopped) {
		t.Fatalf("Start after Stop = %v, want startstop.ErrStopped", err)
	}
	if err := p.Ready(); !errors.Is(err, ErrBrokerUnavailable) {
		t.Fatalf("Ready after Stop = %v, want ErrBrokerUnavailable", err)
	}
}

// TestPublisherSurvivesConcurrentStartStop: Start and Stop from many
// goroutines at once (run with -race), with nothing answering at the
// broker's address: the reconnect loop is the lifecycle under test.
func TestPublisherSurvivesConcurrentStartStop(t *testing.T) {
	t.Parallel()
	for range 5 {
		p, err := New(Options{URL: "amqp://guest:guest@127.0.0.1:1/", ConfirmTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		startstoptest.Stress(t, p)
	}
}

// New refuses options it cannot run with.
func TestNewRefusesMissingURLOrConfirmTimeout(t *testing.T) {
	if _, err := New(Options{ConfirmTimeout: time.Second}); err == nil {
		t.Error("New without a URL = nil error")
	}
	if _, err := New(Options{URL: "amqp://127.0.0.1:1/"}); err == nil {
		t.Error("New without a confirm timeout = nil error")
	}
}
