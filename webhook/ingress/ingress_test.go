package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/publish"
)

// fakePublisher records messages and answers with fn (nil: success). It
// keeps a copy of each body: the ingress reuses the buffer once Publish
// returned (publish.Message.Body; scratch.go), and reading the original
// later raced with another request's envelope.
type fakePublisher struct {
	// idsOnly keeps no body at all (the allocation tests count every copy).
	idsOnly bool
	mu      sync.Mutex
	msgs    []publish.Message
	fn      func(publish.Message) error
}

func (f *fakePublisher) Publish(_ context.Context, m publish.Message) error {
	if f.idsOnly {
		m.Body = nil
	} else {
		m.Body = bytes.Clone(m.Body)
	}
	f.mu.Lock()
	f.msgs = append(f.msgs, m)
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		return fn(m)
	}
	return nil
}

func (f *fakePublisher) messages() []publish.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]publish.Message(nil), f.msgs...)
}

// unitConfig is the flat source accepting two tokens (a rotation).
func unitConfig() Options { return flatOptions("test-token", "next-token") }

func newUnitIngress(t *testing.T, cfg Options, pub MessagePublisher) (*Ingress, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	i, err := New(cfg, pub, discardLogger(), reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return i, reg
}

type req struct {
	method, target, contentType, body string
	headers                           map[string]string
}

func (q req) do(h http.Handler) *httptest.ResponseRecorder {
	if q.method == "" {
		q.method = http.MethodPost
	}
	if q.contentType == "" {
		q.contentType = "application/json"
	}
	r := httptest.NewRequest(q.method, q.target, strings.NewReader(q.body))
	r.Header.Set("Content-Type", q.contentType)
	for k, v := range q.headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

type answer struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
}

func decodeAnswer(t *testing.T, w *httptest.ResponseRecorder) answer {
	t.Helper()
	var a answer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatalf("body %q is not JSON: %v", w.Body.String(), err)
	}
	return a
}

func expect(t *testing.T, w *httptest.ResponseRecorder, code int, status string) {
	t.Helper()
	if a := decodeAnswer(t, w); w.Code != code || a.Status != status {
		t.Fatalf("answer = %d %s, want %d %s", w.Code, w.Body.String(), code, status)
	}
}

// The checks of docs/webhooks.md §3, in order: each row is answered even when
// the request also breaks every later rule.
func TestIngressStatusTableInOrder(t *testing.T) {
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	const path = "/webhooks/whatsapp"
	tests := []struct {
		name   string
		req    req
		code   int
		status string
	}{
		{"405 GET without credential", req{method: http.MethodGet, target: path, contentType: "text/plain"}, 405, StatusMethodNotAllowed},
		{"401 no credential", req{target: path, contentType: "text/plain"}, 401, StatusUnauthorized},
		{"401 wrong token", req{target: path, headers: bearer("nope"), body: "{}"}, 401, StatusUnauthorized},
		{"415 text/plain", req{target: path, headers: bearer("test-token"), contentType: "text/plain", body: "{"}, 415, StatusUnsupportedMediaType},
		{"415 missing content type", req{target: path, headers: bearer("test-token"), contentType: " ", body: "{}"}, 415, StatusUnsupportedMediaType},
		{"400 empty", req{target: path, headers: bearer("test-token")}, 400, StatusInvalidPayload},
		{"400 malformed JSON", req{target: path, headers: bearer("test-token"), body: `{"a":`}, 400, StatusInvalidPayload},
		{"200 JSON with charset", req{target: path, headers: bearer("test-token"), contentType: "application/json; charset=utf-8", body: `{"a":1}`}, 200, StatusPublishedConfirmed},
		{"200 form-urlencoded as bytes", req{target: path, headers: bearer("test-token"), contentType: "application/x-www-form-urlencoded", body: "payload=%7B"}, 200, StatusPublishedConfirmed},
		{"200 again is ALREADY_PROCESSED", req{target: path, headers: bearer("test-token"), body: `{"a":1}`}, 200, StatusAlreadyProcessed},
		{"404 outside the paths", req{target: "/webhooks/whatsappx", headers: bearer("test-token"), body: `{}`}, 404, StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.req.do(i)
			expect(t, w, tt.code, tt.status)
			if tt.code == 405 && w.Header().Get("Allow") != "POST" {
				t.Errorf("Allow = %q, want POST", w.Header().Get("Allow"))
			}
		})
	}
	if n := len(pub.messages()); n != 2 {
		t.Fatalf("published %d messages, want 2", n)
	}
}

func TestIngress413ByContentLengthBeforeReading(t *testing.T) {
	cfg := unitConfig()
	cfg.MaxBodyBytes = 64
	i, _ := newUnitIngress(t, cfg, &fakePublisher{})
	body := &countingReader{r: strings.NewReader(strings.Repeat("x", 1000))}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/whatsapp", body)
	r.ContentLength = 1000
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer test-token")
	w := httptest.NewRecorder()
	i.ServeHTTP(w, r)
	expect(t, w, 413, StatusPayloadTooLarge)
	if body.n != 0 {
		t.Errorf("read %d body bytes before refusing, want 0", body.n)
	}
	if w.Header().Get("Connection") != "close" {
		t.Errorf("Connection = %q, want close", w.Header().Get("Connection"))
	}
}

func TestIngress413ByStreamWithoutContentLength(t *testing.T) {
	cfg := unitConfig()
	cfg.MaxBodyBytes = 64
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, cfg, pub)
	r := httptest.NewRequest(http.MethodPost, "/webhooks/whatsapp", io.NopCloser(strings.NewReader(`{"a":"`+strings.Repeat("x", 100)+`"}`)))
	r.ContentLength = -1 // chunked
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer test-token")
	w := httptest.NewRecorder()
	i.ServeHTTP(w, r)
	expect(t, w, 413, StatusPayloadTooLarge)
	if len(pub.messages()) != 0 {
		t.Fatal("an oversized body was published")
	}
	// Exactly at the limit passes.
	exact := `{"a":"` + strings.Repeat("x", 64-8) + `"}`
	w = req{target: "/webhooks/whatsapp", headers: bearer("test-token"), body: exact}.do(i)
	expect(t, w, 200, StatusPublishedConfirmed)
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestIngress503CarriesReasonAndForgetsTheEvent(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("%w: dial", publish.ErrBrokerUnavailable), ReasonBrokerUnavailable},
		{publish.ErrBrokerBlocked, ReasonBrokerBlocked},
		{fmt.Errorf("%w: 3s", publish.ErrConfirmTimeout), ReasonConfirmTimeout},
		{publish.ErrNack, ReasonNack},
		{publish.ErrUnroutable, ReasonUnroutable},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			fail := true
			pub := &fakePublisher{fn: func(publish.Message) error {
				if fail {
					return tc.err
				}
				return nil
			}}
			i, reg := newUnitIngress(t, unitConfig(), pub)
			q := req{target: "/webhooks/whatsapp", headers: bearer("test-token"), body: `{"x":1}`}
			w := q.do(i)
			a := decodeAnswer(t, w)
			if w.Code != 503 || a.Status != StatusServiceUnavailable || a.Reason != tc.reason {
				t.Fatalf("answer = %d %s, want 503 SERVICE_UNAVAILABLE %s", w.Code, w.Body.String(), tc.reason)
			}
			fail = false
			expect(t, q.do(i), 200, StatusPublishedConfirmed) // the retry is accepted
			expect(t, q.do(i), 200, StatusAlreadyProcessed)
			if got := value(t, i.metrics.requests.WithLabelValues(StatusServiceUnavailable)); got != 1 {
				t.Errorf("requests_total{SERVICE_UNAVAILABLE} = %v, want 1", got)
			}
			wantUnroutable := 0.0
			if tc.reason == ReasonUnroutable {
				wantUnroutable = 1
			}
			if got := value(t, i.metrics.unroutable); got != wantUnroutable {
				t.Errorf("unroutable_total = %v, want %v", got, wantUnroutable)
			}
			if n, err := seriesCount(reg, "webhook_ingress_latency_seconds"); err != nil || n != 2 {
				t.Errorf("latency series = %d, %v; want http_total and amqp_confirm", n, err)
			}
		})
	}
}

// TestLocalFailureIsNotReportedAsABrokerFailure: an envelope the ingress
// could not build (here a receipt time past the years RFC 3339 writes) was
// answered 503 BROKER_UNAVAILABLE and counted as one, sending an operator
// to a healthy broker. It is 503 INTERNAL_ERROR, counted under that
// reason, nothing reaches the publisher, and the retry is accepted once
// the cause is gone.
func TestLocalFailureIsNotReportedAsABrokerFailure(t *testing.T) {
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	i.now = func() time.Time { return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }
	q := req{target: "/webhooks/whatsapp", headers: bearer("test-token"), body: `{"x":1}`}
	w := q.do(i)
	if a := decodeAnswer(t, w); w.Code != 503 || a.Status != StatusServiceUnavailable || a.Reason != ReasonInternalError {
		t.Fatalf("answer = %d %s, want 503 SERVICE_UNAVAILABLE %s", w.Code, w.Body.String(), ReasonInternalError)
	}
	if n := len(pub.messages()); n != 0 {
		t.Errorf("%d messages published", n)
	}
	if got := value(t, i.metrics.failures.WithLabelValues(ReasonInternalError)); got != 1 {
		t.Errorf("publish_failures_total{INTERNAL_ERROR} = %v, want 1", got)
	}
	if got := value(t, i.metrics.failures.WithLabelValues(ReasonBrokerUnavailable)); got != 0 {
		t.Errorf("publish_failures_total{BROKER_UNAVAILABLE} = %v, want 0", got)
	}
	i.now = time.Now
	expect(t, q.do(i), 200, StatusPublishedConfirmed) // the claim was given up
}

func TestIngress429WhileInFlightThenAlreadyProcessed(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	pub := &fakePublisher{fn: func(publish.Message) error {
		entered <- struct{}{}
		<-release
		return nil
	}}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	q := req{target: "/webhooks/whatsapp", headers: bearer("test-token"), body: `{"instance":"i","event":"e","data":{"key":{"id":"k1"}}}`}
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- q.do(i) }()
	<-entered
	if got := value(t, i.metrics.inflight); got != 1 {
		t.Errorf("inflight_current = %v during a publish, want 1", got)
	}
	w := q.do(i)
	expect(t, w, 429, StatusRequestInFlight)
	if w.Header().Get("Retry-After") != "2" {
		t.Errorf("Retry-After = %q, want 2", w.Header().Get("Retry-After"))
	}
	close(release)
	expect(t, <-first, 200, StatusPublishedConfirmed)
	expect(t, q.do(i), 200, StatusAlreadyProcessed)
	if got := value(t, i.metrics.inflight); got != 0 {
		t.Errorf("inflight_current = %v at rest, want 0", got)
	}
	if got := value(t, i.metrics.dedupHits.WithLabelValues("IN_FLIGHT")); got != 1 {
		t.Errorf("dedup_hits{IN_FLIGHT} = %v, want 1", got)
	}
}

func TestIngressRefusesToStartWithoutToken(t *testing.T) {
	cfg := unitConfig()
	cfg.Sources[0].Tokens = nil
	if _, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry()); err == nil {
		t.Fatal("New with no token = nil error, want a refusal")
	}
	cfg.Sources[0].Tokens = []string{""}
	if _, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry()); err == nil {
		t.Fatal("New with an empty token = nil error, want a refusal")
	}
	cfg.Sources = nil
	if _, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry()); err == nil {
		t.Fatal("New with no source = nil error")
	}
}

func TestIngressEnvelope(t *testing.T) {
	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	at := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	i.now = func() time.Time { return at }
	body := `{"instance":"inst","event":"messages.upsert","data":{"key":{"id":"ABC"}},"apikey":"secret-of-instance"}`
	w := req{target: "/webhooks/whatsapp/messages-upsert", body: body, headers: map[string]string{
		"Authorization": "Bearer test-token", "User-Agent": "axios/1.7", "X-Request-Id": "r1", "Cookie": "c=1",
	}}.do(i)
	expect(t, w, 200, StatusPublishedConfirmed)
	m := pub.messages()[0]
	if m.ID != bindBody("inst:messages.upsert:ABC", []byte(body)) || m.RoutingKey != "yzex.events.connect.whatsapp.legacy_forward" {
		t.Fatalf("message id %q key %q", m.ID, m.RoutingKey)
	}
	env, err := envelope.Decode(m.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"content-type": "application/json", "user-agent": "axios/1.7", "x-request-id": "r1"}
	if fmt.Sprint(env.Headers) != fmt.Sprint(want) {
		t.Errorf("headers = %v, want %v (no credentials, no cookies)", env.Headers, want)
	}
	if string(env.Body) != body || env.ID != m.ID || env.Source != "whatsapp" || env.Event != "messages-upsert" ||
		!env.ReceivedAt.Equal(at) || env.ContentType != "application/json" || env.Redacted != nil {
		t.Errorf("envelope = %+v", env)
	}
}

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// seriesCount counts the series of one metric family.
func seriesCount(reg *prometheus.Registry, name string) (int, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric()), nil
		}
	}
	return 0, nil
}

func TestUnconfiguredAnswers503NotConfigured(t *testing.T) {
	cfg := unitConfig()
	cfg.Sources[0].Tokens = nil
	_, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry())
	u := NewUnconfigured([]string{cfg.Sources[0].Path}, err)
	if fmt.Sprint(u.Paths()) != "[/webhooks/whatsapp]" || u.Ready() == nil {
		t.Fatalf("paths %v ready %v", u.Paths(), u.Ready())
	}
	w := req{target: "/webhooks/whatsapp", headers: bearer("x"), body: "{}"}.do(u)
	if a := decodeAnswer(t, w); w.Code != 503 || a.Reason != ReasonNotConfigured {
		t.Fatalf("answer = %d %s", w.Code, w.Body.String())
	}
	expect(t, req{method: http.MethodGet, target: "/webhooks/whatsapp"}.do(u), 405, StatusMethodNotAllowed)
}

// The seed's metric names are a contract (docs/webhooks.md §9).
func TestIngressMetricNames(t *testing.T) {
	pub := &fakePublisher{fn: func(m publish.Message) error {
		if strings.Contains(string(m.Body), "eyJ1IjoxfQ") { // {"u":1}
			return publish.ErrUnroutable
		}
		return nil
	}}
	i, reg := newUnitIngress(t, unitConfig(), pub)
	req{target: "/webhooks/whatsapp", headers: bearer("test-token"), body: `{"a":1}`}.do(i)
	req{target: "/webhooks/whatsapp", headers: bearer("test-token"), body: `{"a":1}`}.do(i)
	req{target: "/webhooks/whatsapp", headers: bearer("test-token"), body: `{"u":1}`}.do(i)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range []string{
		"webhook_ingress_requests_total", "webhook_ingress_latency_seconds", "webhook_ingress_dedup_hits_total",
		"webhook_ingress_unroutable_total", "webhook_ingress_inflight_current",
	} {
		if !got[name] {
			t.Errorf("metric %s missing; have %v", name, got)
		}
	}
	if v := value(t, i.metrics.unroutable); v != 1 {
		t.Errorf("unroutable_total = %v, want 1", v)
	}
	if v := value(t, i.metrics.dedupHits.WithLabelValues("CONFIRMED")); v != 1 {
		t.Errorf("dedup_hits_total{CONFIRMED} = %v, want 1", v)
	}
}

// A panic between claiming an event id and settling it (the gateway's
// recoverer answers 500) left the id IN_FLIGHT for dedup_ttl: every retry
// got 429 for 30 minutes, longer than Evolution retries, and the event was
// lost.
func TestPanicWhilePublishingReleasesTheEventID(t *testing.T) {
	cfg := flatOptions("tok")
	var panicked bool
	pub := &fakePublisher{fn: func(publish.Message) error {
		if !panicked {
			panicked = true
			panic("publisher bug")
		}
		return nil
	}}
	i, err := New(cfg, pub, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/whatsapp", strings.NewReader(`{"id":"evt-1"}`))
		r.Header.Set("Authorization", "Bearer tok")
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "evt-1")
		w := httptest.NewRecorder()
		func() {
			defer func() { _ = recover() }() // the gateway's recoverer
			i.ServeHTTP(w, r)
		}()
		return w
	}
	post()
	if w := post(); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), StatusPublishedConfirmed) {
		t.Errorf("retry after a panic: %d %s, want 200 PUBLISHED_CONFIRMED", w.Code, w.Body.String())
	}
}

// TestRefusedPublishLogsAWarningOnlyForTheTopology: a 503 is logged per
// request as a warning only when the reason points at the topology or the
// broker's judgement (unroutable, nack, forward queue missing or unbound);
// broker outages are logged once by the publisher, so their per-request
// lines are debug.
func TestRefusedPublishLogsAWarningOnlyForTheTopology(t *testing.T) {
	for _, tc := range []struct {
		err   error
		level string
	}{
		{publish.ErrUnroutable, "WARN"},
		{publish.ErrNack, "WARN"},
		{publish.ErrQueueMissing, "WARN"},
		{publish.ErrForwardUnbound, "WARN"},
		{fmt.Errorf("%w: dial", publish.ErrBrokerUnavailable), "DEBUG"},
		{publish.ErrBrokerBlocked, "DEBUG"},
		{fmt.Errorf("%w: 3s", publish.ErrConfirmTimeout), "DEBUG"},
	} {
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		i, err := New(unitConfig(), &fakePublisher{fn: func(publish.Message) error { return tc.err }}, logger, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		w := req{target: "/webhooks/whatsapp", headers: bearer("test-token"), body: `{"x":1}`}.do(i)
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%v: answer %d, want 503", tc.err, w.Code)
		}
		var line string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "webhook not published") {
				line = l
			}
		}
		if !strings.Contains(line, "level="+tc.level+" ") {
			t.Errorf("%v: logged %q, want level %s", tc.err, line, tc.level)
		}
	}
}
