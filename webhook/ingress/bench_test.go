package ingress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/publish"
	"github.com/olp-edu/borda/webhook/topology"
)

// BenchmarkWebhookThroughput compares, in one run and with the same number
// of publishes in flight (64) and 1 KB persistent messages on a quorum
// queue: a bare amqp091-go confirm-mode publisher (the ceiling), the
// Publisher, and the whole ingress over loopback HTTP. Each reports msg/s
// and p50/p99 latency; the ratios are what matter (docs/performance.md).
//
//	go test -run '^$' -bench WebhookThroughput -benchtime 5000x ./webhook/
func BenchmarkWebhookThroughput(b *testing.B) {
	const inFlight = 64
	body := []byte(`{"event":"messages.upsert","pad":"` + strings.Repeat("x", 980) + `"}`)

	b.Run("bare-amqp091", func(b *testing.B) {
		cfg := testConfig(b)
		cfg.Publisher.Topology.QueueType = topology.Quorum
		newTestPublisher(b, cfg) // declares the topology
		conn, err := amqp.Dial(cfg.Publisher.URL)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			b.Fatal(err)
		}
		sem := make(chan struct{}, inFlight)
		lat := make([]time.Duration, b.N)
		var wg sync.WaitGroup
		b.ResetTimer()
		for i := range b.N {
			sem <- struct{}{}
			t0 := time.Now()
			dc, err := ch.PublishWithDeferredConfirm(cfg.Publisher.Exchange, cfg.Publisher.RoutingKey, true, false, amqp.Publishing{
				DeliveryMode: amqp.Persistent, ContentType: "application/json", MessageId: fmt.Sprint(i), Body: body})
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !dc.Wait() {
					b.Error("nack")
				}
				lat[i] = time.Since(t0)
				<-sem
			}()
		}
		wg.Wait()
		report(b, lat)
	})

	b.Run("publisher", func(b *testing.B) {
		cfg := testConfig(b)
		cfg.Publisher.Topology.QueueType = topology.Quorum
		if v := os.Getenv("BENCH_CHANNELS"); v != "" { // try other pool sizes
			cfg.Publisher.Channels, _ = strconv.Atoi(v)
		}
		p := newTestPublisher(b, cfg)
		parallel(b, inFlight, func(i int) error {
			return p.Publish(context.Background(), publish.Message{ID: fmt.Sprint(i), Body: body})
		})
	})

	b.Run("ingress-http", func(b *testing.B) {
		cfg := testConfig(b)
		cfg.Publisher.Topology.QueueType = topology.Quorum
		s := newStack(b, cfg)
		parallel(b, inFlight, func(i int) error {
			r, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/webhooks/whatsapp", bytes.NewReader(append(fmt.Appendf(nil, `{"n":%d,`, i), body[1:]...)))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer test-token")
			resp, err := s.client.Do(r)
			if err != nil {
				return err
			}
			// Drain before Close: an unread body makes the transport drop
			// the connection, and the benchmark would measure TCP dials.
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
	})
}

// BenchmarkWebhookFixedRate posts b.N deliveries through the ingress at a
// fixed 500 requests/s (open loop: each on its own goroutine, on a ticker)
// and reports p50/p99; the target is p99 ≤ 10 ms, the seed's SLO
// p95 < 60 ms.
//
//	go test -run '^$' -bench WebhookFixedRate -benchtime 2500x ./webhook/
func BenchmarkWebhookFixedRate(b *testing.B) {
	cfg := testConfig(b)
	cfg.Publisher.Topology.QueueType = topology.Quorum
	s := newStack(b, cfg)
	body := strings.Repeat("x", 980)
	lat := make([]time.Duration, b.N)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/webhooks/whatsapp", strings.NewReader(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, body)))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer test-token")
			t0 := time.Now()
			resp, err := s.client.Do(r)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body) // keep the connection
			resp.Body.Close()
			lat[i] = time.Since(t0)
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	report(b, lat)
}

// parallel runs b.N calls of fn from n goroutines and reports.
func parallel(b *testing.B, n int, fn func(i int) error) {
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := fn(i); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	report(b, lat)
}

func report(b *testing.B, lat []time.Duration) {
	b.StopTimer()
	elapsed := b.Elapsed()
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "msg/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
