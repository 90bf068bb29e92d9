package ingress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/webhook/internal/brokertest"
	"github.com/olp-edu/borda/webhook/publish"
)

// gatedPublisher holds every publish until open is closed.
type gatedPublisher struct {
	next MessagePublisher
	open chan struct{}
}

func (g gatedPublisher) Publish(ctx context.Context, m publish.Message) error {
	<-g.open
	return g.next.Publish(ctx, m)
}

// The shutdown order of docs/configuration.md (shutdown): requests in flight when SIGTERM
// arrives finish with their true answer (stop accepting, drain HTTP, then
// drain confirms and close); none is cut off, none gets a 200 it did not
// earn.
func TestShutdownInFlightRequestsGetTheirTrueAnswer(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	pub := newTestPublisher(t, cfg)
	gate := gatedPublisher{next: pub, open: make(chan struct{})}
	i, err := New(cfg.Options, gate, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: i}
	go func() { _ = srv.Serve(ln) }()
	s := &stack{cfg: cfg, pub: pub, ingress: i, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, admin: brokertest.NewAdmin(t)}
	url := "http://" + ln.Addr().String()

	const n = 20
	var wg sync.WaitGroup
	codes := make([]int, n)
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := http.NewRequest(http.MethodPost, url+"/webhooks/whatsapp", stringsReader(fmt.Sprintf(`{"k":%d}`, k)))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer test-token")
			resp, err := s.client.Do(r)
			if err != nil {
				t.Errorf("request %d cut off: %v", k, err)
				return
			}
			resp.Body.Close()
			codes[k] = resp.StatusCode
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for value(t, i.metrics.inflight) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %v requests in flight", value(t, i.metrics.inflight))
		}
		time.Sleep(5 * time.Millisecond)
	}

	// SIGTERM: stop accepting and drain HTTP while the publishes are held.
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	// Wait until the listener refuses (Shutdown closed it), bounded.
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 5s after Shutdown")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select { // the drain is waiting on the held publishes, not done
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while %d publishes were still held", err, n)
	default:
	}
	close(gate.open)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pub.Stop(ctx); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	wg.Wait()
	for k, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d answered %d, want 200", k, c)
		}
	}
	if got := s.admin.Count(cfg.Publisher.Topology.ForwardQueue); got != n {
		t.Fatalf("queue holds %d, want %d", got, n)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
