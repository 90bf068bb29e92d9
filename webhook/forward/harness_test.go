package forward

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/keyspace"
	"github.com/olp-edu/borda/redisconn"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/topology"
)

const testSecret = "test-secret"

// action is what the scripted legacy endpoint does with one request.
type action struct {
	status     int
	retryAfter string
	sleep      time.Duration
	drop       bool // hijack and close the connection without answering
	body       string
}

// hit is one request the legacy endpoint received.
type hit struct {
	header http.Header
	body   []byte
	te     []string
	cl     int64
	status int // 0: no answer (dropped or slept past the client's timeout)
}

// legacy is the scripted legacy endpoint (a real HTTP server).
type legacy struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script func(n int, key string) action
	hits   []hit
}

func newLegacy(t *testing.T, script func(n int, key string) action) *legacy {
	l := &legacy{script: script}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := legacyVerify(r.Header, body, []byte(testSecret)); err != "" {
			t.Errorf("legacy endpoint: %s (Idempotency-Key %q)", err, r.Header.Get(HeaderIdempotencyKey))
		}
		key := r.Header.Get(HeaderIdempotencyKey)
		l.mu.Lock()
		n := 0
		for _, h := range l.hits {
			if h.header.Get(HeaderIdempotencyKey) == key {
				n++
			}
		}
		a := l.script(n, key)
		h := hit{header: r.Header.Clone(), body: body, te: r.TransferEncoding, cl: r.ContentLength}
		if !a.drop && a.sleep == 0 {
			h.status = a.status
		}
		l.hits = append(l.hits, h)
		l.mu.Unlock()
		switch {
		case a.drop:
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		case a.sleep > 0:
			select {
			case <-time.After(a.sleep):
			case <-r.Context().Done():
			}
			return
		}
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(l.srv.Close)
	return l
}

// legacyVerify checks a POST's signatures as a receiver written from
// docs/forwarder.md would, with crypto/hmac alone (never the package's
// Sign or Verify, so a change to those cannot make it agree): v1 over
// timestamp "." body, v2 over timestamp, Idempotency-Key, Content-Type and
// body joined by "\n". It returns "" when every signature sent matches and
// at least one is sent.
func legacyVerify(h http.Header, body, secret []byte) string {
	ts := h.Get("X-Webhook-Timestamp")
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
		return "timestamp not unix seconds: " + ts
	}
	hexMAC := func(msg string) string {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(msg))
		return hex.EncodeToString(m.Sum(nil))
	}
	v1, v2 := h.Get("X-Webhook-Signature"), h.Get("X-Webhook-Signature-V2")
	if v1 == "" && v2 == "" {
		return "no signature"
	}
	if v1 != "" && v1 != hexMAC(ts+"."+string(body)) {
		return "v1 signature does not match"
	}
	if v2 != "" && v2 != hexMAC(ts+"\n"+h.Get("Idempotency-Key")+"\n"+h.Get("Content-Type")+"\n"+string(body)) {
		return "v2 signature does not match"
	}
	return ""
}

func (l *legacy) all() []hit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hit(nil), l.hits...)
}

// delivered counts the 2xx answers per Idempotency-Key.
func (l *legacy) delivered() map[string]int {
	out := map[string]int{}
	for _, h := range l.all() {
		if h.status >= 200 && h.status < 300 {
			out[h.header.Get(HeaderIdempotencyKey)]++
		}
	}
	return out
}

func always(a action) func(int, string) action { return func(int, string) action { return a } }

// harness is one test's broker topology, Redis keyspace and endpoint.
type harness struct {
	t    *testing.T
	cfg  harnessConfig
	top  topology.Topology
	conn *amqp.Connection
	ch   *amqp.Channel
	rdb  redis.UniversalClient
	// front is the Upstash REST test server rdb goes through (Transport
	// REST), for tests that count requests; nil on RESP.
	front *upstashtest.Server
	keys  keyspace.Keyspace
	end   *legacy
	reg   *prometheus.Registry
}

// harnessConfig is what a test may change before the harness declares
// its topology: the forwarder's typed options and the broker objects,
// built directly (the mapping of a configuration file into them is
// cmd/borda's, tested there: options_mapping_test.go).
type harnessConfig struct {
	// Options holds the forwarder's own settings (URL, HMACSecret,
	// Prefetch, Timeout, LeaseTTL, RetentionTTL, Breaker); options() adds
	// the harness's broker, Redis and registry.
	Options  Options
	Topology topology.Topology
	RedisURL string
	// Transport is how the forwarder reaches RedisURL: servicetest.RESP
	// ("" too) or servicetest.REST (through internal/upstashtest).
	Transport string
	// Undeclared leaves the topology to the forwarder (its publisher
	// declares it), as `borda forward` does on a fresh broker.
	Undeclared bool
}

// over returns a mutate that sets the harness's Redis transport.
func over(transport string) func(*harnessConfig) {
	return func(c *harnessConfig) { c.Transport = transport }
}

// overEachTransport runs fn as a subtest per Redis transport (RESP, and
// the Upstash REST API through internal/upstashtest): the idempotency
// keys' conformance matrix.
func overEachTransport(t *testing.T, fn func(t *testing.T, transport string)) {
	t.Helper()
	for _, transport := range servicetest.RedisTransports {
		t.Run(transport, func(t *testing.T) { fn(t, transport) })
	}
}

func newHarness(t *testing.T, end *legacy, mutate func(*harnessConfig)) *harness {
	t.Helper()
	amqpURL := servicetest.AMQPURL(t)
	redisURL := servicetest.RedisURL(t)
	name := servicetest.Name(t)
	cfg := harnessConfig{
		Options: Options{
			URL: end.srv.URL + "/legacy/webhook", HMACSecret: []byte(testSecret),
			SignatureVersions: []string{SignatureV1, SignatureV2},
			Prefetch:          20, Timeout: time.Second, LeaseTTL: 3 * time.Second, RetentionTTL: 7 * 24 * time.Hour,
			Breaker: BreakerOptions{Failures: 1000, OpenFor: time.Second},
			AMQPURL: amqpURL,
		},
		Topology: topology.Topology{
			Exchange: name + "-ex", RoutingKey: name + ".fwd",
			ForwardQueue: name + "-fwd", EventsQueue: name + "-events", EventsBinding: name + ".#",
			DLQ:       name + "-dlq",
			Retry:     []topology.Delay{{Name: "200ms", TTL: 200 * time.Millisecond}, {Name: "400ms", TTL: 400 * time.Millisecond}},
			QueueType: topology.QueueType("quorum"), RetryExchange: name + "-retry", DLXExchange: name + "-dlx",
		},
		RedisURL: redisURL,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	top := cfg.Topology

	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatalf("dialing amqp: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("opening channel: %v", err)
	}
	if !cfg.Undeclared {
		if err := top.Declare(ch); err != nil {
			t.Fatalf("declaring topology: %v", err)
		}
	}
	t.Cleanup(func() {
		c, err := conn.Channel()
		if err == nil {
			queues := []string{top.ForwardQueue, top.EventsQueue, top.DLQ}
			for i := range top.Retry {
				queues = append(queues, top.RetryQueue(i))
			}
			for _, q := range queues {
				_, _ = c.QueueDelete(q, false, false, false)
			}
			for _, e := range []string{top.Exchange, top.RetryExchange, top.DLXExchange} {
				_ = c.ExchangeDelete(e, false, false)
			}
		}
		conn.Close()
	})
	var rdb redis.UniversalClient
	var front *upstashtest.Server
	if cfg.Transport == servicetest.REST {
		var restURL string
		front, restURL = servicetest.RESTFront(t, cfg.RedisURL)
		rdb = servicetest.RESTClient(t, restURL)
	} else if rdb, err = redisconn.New(redisconn.Options{URL: cfg.RedisURL, ReadTimeout: time.Second}); err != nil {
		t.Fatalf("redis client: %v", err)
	}
	keys := keyspace.MustNew(servicetest.KeyPrefix(t))
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, keys.Prefix()+"*", 100).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		rdb.Close()
	})
	return &harness{t: t, cfg: cfg, top: top, conn: conn, ch: ch, rdb: rdb, front: front, keys: keys, end: end, reg: prometheus.NewRegistry()}
}

// options are the forwarder's options of the test, with the harness's
// topology, Redis, keyspace and registry.
func (h *harness) options() Options {
	o := h.cfg.Options
	scrub := append(redact.URLSecrets(o.URL), string(o.HMACSecret))
	o.Scrub = func(text string) string { return redact.Secrets(text, scrub) }
	o.Topology, o.Redis, o.Keys, o.Registerer = h.top, h.rdb, h.keys, h.reg
	// The harness's events are of one source, as a flat-section
	// deployment's: their Idempotency-Key is the bare id.
	o.BareKeySource = "evolution"
	return o
}

// start runs a forwarder until the test ends.
func (h *harness) start(tweak func(*Forwarder)) *Forwarder {
	h.t.Helper()
	opts := h.options()
	opts.SampleEvery = 100 * time.Millisecond
	opts.Reconnect = 100 * time.Millisecond
	return h.run(opts, tweak)
}

// run builds a forwarder from opts, applies tweak (nil: none) and runs it
// until the test ends; the cleanup waits up to 10 s for it to stop.
func (h *harness) run(opts Options, tweak func(*Forwarder)) *Forwarder {
	h.t.Helper()
	f, err := New(opts)
	if err != nil {
		h.t.Fatalf("New: %v", err)
	}
	if tweak != nil {
		tweak(f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			h.t.Error("forwarder did not stop within 10s")
		}
	})
	return f
}

// publish sends an envelope as the ingress does.
func (h *harness) publish(env envelope.Envelope) {
	h.t.Helper()
	b, err := env.Encode()
	if err != nil {
		h.t.Fatal(err)
	}
	h.publishRaw(env.ID, b)
}

func (h *harness) publishRaw(id string, body []byte) {
	h.t.Helper()
	err := h.ch.PublishWithContext(context.Background(), h.top.Exchange, h.top.RoutingKey, false, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent,
		MessageId:    id,
		ContentType:  envelope.ContentType,
		Body:         body,
	})
	if err != nil {
		h.t.Fatalf("publishing: %v", err)
	}
}

// dlq drains the DLQ (acking) until want messages arrived or the timeout.
func (h *harness) dlq(want int, timeout time.Duration) []amqp.Delivery {
	h.t.Helper()
	var out []amqp.Delivery
	deadline := time.Now().Add(timeout)
	for len(out) < want && time.Now().Before(deadline) {
		d, ok, err := h.ch.Get(h.top.DLQ, true)
		if err != nil {
			h.t.Fatalf("reading the DLQ: %v", err)
		}
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		out = append(out, d)
	}
	if len(out) < want {
		h.t.Fatalf("DLQ: got %d messages within %s, want %d", len(out), timeout, want)
	}
	return out
}

func (h *harness) depth(queue string) int {
	h.t.Helper()
	q, err := h.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		h.t.Fatalf("inspecting %s: %v", queue, err)
	}
	return q.Messages
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func jsonEnvelope(id string, body string) envelope.Envelope {
	return envelope.New(id, "evolution", "application/json",
		map[string]string{"user-agent": "axios/1.7.2", "x-request-id": "req-" + id, "authorization": "Bearer nope"},
		[]byte(body), time.Now())
}

// value reads a counter or gauge.
// observed returns a histogram's count and sum (-1, -1 when it cannot be
// read).
func observed(m prometheus.Metric) (count uint64, sum float64) {
	var out dto.Metric
	if err := m.Write(&out); err != nil || out.Histogram == nil {
		return 0, -1
	}
	return out.Histogram.GetSampleCount(), out.Histogram.GetSampleSum()
}

func value(m prometheus.Metric) float64 {
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		return -1
	}
	switch {
	case out.Counter != nil:
		return out.Counter.GetValue()
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	}
	return -1
}
