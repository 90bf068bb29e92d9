package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/envelope"
)

// TestSIGTERMAnswersWebhooksInFlightTruthfully is docs/edge.md's shutdown
// order through the real binary and a real signal: webhooks whose confirms
// are still on their way when SIGTERM arrives (the broker link delays
// every byte from RabbitMQ by 400 ms) each get their true answer, 200
// PUBLISHED_CONFIRMED only for an event RabbitMQ holds, and the process
// exits 0. The in-process test (webhook's
// TestShutdownInFlightRequestsGetTheirTrueAnswer) calls Shutdown itself;
// this one also covers cmd/borda's signal wiring and the order it runs.
func TestSIGTERMAnswersWebhooksInFlightTruthfully(t *testing.T) {
	redisURL := servicetest.RedisURL(t)
	amqpURL := servicetest.AMQPURL(t)
	n := newNames(t)
	t.Cleanup(func() { n.deleteTopology(t, amqpURL) })

	u, err := url.Parse(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := toxiproxy.NewProxy(toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), servicetest.Name(t), "127.0.0.1:0", u.Host)
	if err := proxy.Start(); err != nil {
		t.Fatalf("starting the broker proxy: %v", err)
	}
	t.Cleanup(proxy.Stop)
	slowURL := *u
	slowURL.Host = proxy.Listen

	up := upstream("alpha")
	defer up.Close()
	p := startServe(t, n.config(up.URL, up.URL, slowURL.String(), redisURL)+"shutdown:\n  drain: 10s\n", "WEBHOOK_TOKENS=e2e-token")
	waitReady(t, p.public+"/readyz/webhook")
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"slow-confirms","type":"latency","stream":"downstream","attributes":{"latency":400}}`)); err != nil {
		t.Fatal(err)
	}

	const inFlight = 16
	type answer struct {
		id     string
		status int
		body   string
		err    error
	}
	answers := make(chan answer, inFlight)
	client := &http.Client{Timeout: 15 * time.Second}
	var sent sync.WaitGroup
	for i := range inFlight {
		sent.Add(1)
		go func() {
			id := fmt.Sprintf("%s-sigterm-%d", n.prefix, i)
			body := fmt.Sprintf(`{"event":"messages.upsert","instance":"e2e","data":{"key":{"id":%q}}}`, id)
			req, _ := http.NewRequest(http.MethodPost, p.public+"/webhooks/whatsapp", bytes.NewReader([]byte(body)))
			req.Header.Set("Authorization", "Bearer e2e-token")
			req.Header.Set("Content-Type", "application/json")
			sent.Done()
			resp, err := client.Do(req)
			a := answer{id: id, err: err}
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				a.status, a.body = resp.StatusCode, string(b)
			}
			answers <- a
		}()
	}
	sent.Wait()
	// SIGTERM only once the gateway holds all of them (its own gauge), so
	// a request still connecting on a loaded machine is not mistaken for
	// one cut off.
	waitInFlight(t, p.admin, inFlight)
	signalled := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	confirmed := map[string]bool{}
	for range inFlight {
		a := <-answers
		switch {
		case a.err != nil:
			t.Errorf("%s: no answer (%v): a request in flight at SIGTERM was cut off", a.id, a.err)
		case a.status == 200 && strings.Contains(a.body, `"PUBLISHED_CONFIRMED"`):
			confirmed[a.id] = true
		case a.status == 503 && strings.Contains(a.body, `"SERVICE_UNAVAILABLE"`):
		default:
			t.Errorf("%s: %d %s, want 200 PUBLISHED_CONFIRMED or 503", a.id, a.status, a.body)
		}
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("borda serve exited with %v after SIGTERM, want 0", err)
		}
		t.Logf("SIGTERM → exit in %v; %d of %d in-flight webhooks confirmed", time.Since(signalled).Round(time.Millisecond), len(confirmed), inFlight)
	case <-time.After(15 * time.Second):
		t.Fatal("borda serve still running 15 s after SIGTERM")
	}
	// The log is batched (logsink): its last line must still be there.
	if logs := p.logs.String(); !strings.Contains(logs, `"msg":"stopped"`) {
		t.Errorf("the last log line (\"stopped\") was lost at exit; log tail:\n%s", logs[max(0, len(logs)-600):])
	}
	if len(confirmed) == 0 {
		t.Errorf("no webhook in flight at SIGTERM was confirmed: shutdown did not wait for the outstanding confirms")
	}

	// Every 200 is a message in the queue.
	queued := map[string]bool{}
	n.withChannel(func(ch *amqp.Channel) {
		for {
			d, ok, err := ch.Get(n.queue, true)
			if err != nil || !ok {
				return
			}
			env, err := envelope.Decode(d.Body)
			if err != nil {
				t.Errorf("a message in %s is not an envelope: %v", n.queue, err)
				continue
			}
			for id := range confirmed {
				if bytes.Contains(env.Body, []byte(`"id":"`+id+`"`)) {
					queued[id] = true
				}
			}
		}
	}, amqpURL)
	for id := range confirmed {
		if !queued[id] {
			t.Errorf("%s was answered 200 PUBLISHED_CONFIRMED but is not in %s", id, n.queue)
		}
	}
}

// waitInFlight waits up to 10 s for borda's webhook_ingress_inflight_current
// (admin /metrics) to reach n.
func waitInFlight(t *testing.T, admin string, n int) {
	t.Helper()
	want := fmt.Sprintf("webhook_ingress_inflight_current %d", n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(admin + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), "\n"+want+"\n") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("borda never had %d webhooks in flight (%s) within 10 s", n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSIGTERMWithSlowUploadersExitsWithinBudget: two clients uploading a
// body a byte every 200 ms (legitimately: no body timeout applies yet)
// when SIGTERM arrives, one to a proxied route and one to the webhook
// ingress. The old gateway took drain + 5 s and more (with shutdown.drain
// 5s, 11.4 s): the ingress's body read ignores cancellation, so shutdown
// waited its full 5 s unwind on the handler, then up to 10 s more for
// confirms. Now the drain deadline closes every connection and the
// confirms get shutdown.confirm_drain, so SIGTERM → exit stays within
// readiness_grace + drain + confirm_drain plus the 1 s unwind bound.
func TestSIGTERMWithSlowUploadersExitsWithinBudget(t *testing.T) {
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer up.Close()
	const drain, confirm = time.Second, time.Second
	p := startServe(t, minimalServe(up.URL, "    timeout: 60s\n",
		"server:\n  body_timeout: 60s\n  body_min_rate: 0\nshutdown:\n  drain: 1s\n  confirm_drain: 1s\n"+
			"webhook:\n  path: /webhooks/whatsapp\n  body_timeout: 60s\n"), "WEBHOOK_TOKENS=e2e-token")

	stop := make(chan struct{})
	defer close(stop)
	upload := func(head string) {
		conn, err := net.DialTimeout("tcp", hostPort(p.public), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(conn, head+"Content-Length: 100000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		go func() {
			for range 150 { // 30 s at most
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
	}
	upload("POST /upload HTTP/1.1\r\nHost: a\r\n")
	upload("POST /webhooks/whatsapp HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer e2e-token\r\nContent-Type: application/json\r\n")
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the upload never reached the upstream")
	}
	waitInFlight(t, p.admin, 1)
	signalled := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	budget := drain + confirm + time.Second // + Shutdown's unwind bound
	select {
	case err := <-p.done:
		took := time.Since(signalled)
		t.Logf("SIGTERM → exit in %v with two slow uploads in flight (budget %v + 1 s slack)", took.Round(time.Millisecond), budget)
		if err != nil {
			t.Errorf("borda serve exited with %v, want 0", err)
		}
		if took > budget+time.Second {
			t.Errorf("SIGTERM → exit took %v, over drain + confirm_drain + unwind (%v) + 1 s", took, budget)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("borda serve still running 20 s after SIGTERM")
	}
}
