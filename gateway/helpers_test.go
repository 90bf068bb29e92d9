package gateway

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/telemetry"
)

// harness is a gateway under test with its collaborators.
type harness struct {
	srv     *Server
	reg     *prometheus.Registry
	front   *httptest.Server // the public handler on loopback
	rec     *fakeRecorder
	limiter *fakeLimiter
	logs    *syncBuffer
}

type harnessOpt func(*Deps)

func newHarness(t testing.TB, gw Options, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), rec: &fakeRecorder{}, limiter: &fakeLimiter{}, logs: &syncBuffer{}}
	deps := Deps{
		Limiter:  h.limiter,
		Recorder: h.rec,
		Registry: h.reg,
		Logger:   slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&deps)
	}
	srv := newServer(t, gw, deps)
	h.srv = srv
	h.front = httptest.NewServer(srv.Handler())
	t.Cleanup(h.front.Close)
	return h
}

func withLimiter(l Limiter) harnessOpt { return func(d *Deps) { d.Limiter = l } }

// get sends a request through the harness's public listener.
func (h *harness) do(t testing.TB, req *http.Request) *http.Response {
	t.Helper()
	res, err := h.front.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func (h *harness) newRequest(t testing.TB, method, host, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, h.front.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	return req
}

// serve runs one request through the full chain in process, from the
// given peer address (for client-IP tests), and returns the recorder.
func (h *harness) serve(req *http.Request, remoteAddr string) *httptest.ResponseRecorder {
	req.RemoteAddr = remoteAddr
	rr := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rr, req)
	return rr
}

func (h *harness) requests(route, code, method string) float64 {
	return counterValue(h.srv.metrics.requests.WithLabelValues(route, code, method))
}

func (h *harness) upstreamErrors(route, kind string) float64 {
	return counterValue(h.srv.metrics.upstream.WithLabelValues(route, kind))
}

// captured is what an upstream saw of one request.
type captured struct {
	Host       string
	RequestURI string
	Header     http.Header
}

// recordingUpstream answers 200 "ok" and keeps what it saw.
type recordingUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []captured
}

func newRecordingUpstream(t testing.TB, h http.HandlerFunc) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, captured{Host: r.Host, RequestURI: r.RequestURI, Header: r.Header.Clone()})
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *recordingUpstream) last(t testing.TB) captured {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("upstream was not called")
	}
	return u.seen[len(u.seen)-1]
}

func (u *recordingUpstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// fakeLimiter records subjects and answers what decide says (allow all
// when nil).
type fakeLimiter struct {
	mu       sync.Mutex
	subjects []ratelimit.Subject
	decide   func(ratelimit.Subject) ratelimit.Verdict
	// identity is KeysIdentity's answer for every route (false: no form
	// body is read for a token).
	identity bool
}

func (f *fakeLimiter) KeysIdentity(string) bool { return f.identity }

func (f *fakeLimiter) Decide(_ context.Context, s ratelimit.Subject) ratelimit.Verdict {
	f.mu.Lock()
	f.subjects = append(f.subjects, s)
	d := f.decide
	f.mu.Unlock()
	if d == nil {
		return ratelimit.Verdict{}
	}
	return d(s)
}

func (f *fakeLimiter) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subjects)
}

func blockVerdict() ratelimit.Verdict {
	return ratelimit.Verdict{Decisions: []ratelimit.Decision{{
		Rule: "burst", Scope: ratelimit.ScopeIP, Outcome: ratelimit.OutcomeBlock, Limit: 5, Remaining: 0,
		Window: 5 * time.Second, ResetAfter: 3 * time.Second, RetryAfter: 3 * time.Second,
		Message: "Muitas requisições em sequência. Tente novamente em 3 segundos.",
	}}}
}

func wouldBlockVerdict() ratelimit.Verdict {
	return ratelimit.Verdict{Decisions: []ratelimit.Decision{{
		Rule: "burst", Scope: ratelimit.ScopeIP, Outcome: ratelimit.OutcomeWouldBlock, Limit: 5, Remaining: 0,
		Window: 5 * time.Second, ResetAfter: 3 * time.Second, RetryAfter: 3 * time.Second,
	}}}
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []telemetry.Event
}

func (f *fakeRecorder) Record(e telemetry.Event) {
	f.mu.Lock()
	f.events = append(f.events, e)
	f.mu.Unlock()
}

func (f *fakeRecorder) all() []telemetry.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]telemetry.Event(nil), f.events...)
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rawRequest writes raw bytes to addr and returns the parsed response and
// the connection's reader (for upgrades and streams).
func rawRequest(t testing.TB, addr, raw string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return res, conn, br
}

// eventually polls cond every 10 ms for up to d.
func eventually(t testing.TB, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

type (
	ratelimitSubject = ratelimit.Subject
	ratelimitVerdict = ratelimit.Verdict
)

type telemetryEvent = telemetry.Event
