package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/cookies"
)

func TestNoRouteIs404ProblemInPortuguese(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(onHosts(testRoute(t, "portal", up.URL), "portal.example.org")))
	res := h.do(t, h.newRequest(t, http.MethodGet, "other.example.org", "/x"))
	var p problem
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 404 || p.Status != 404 || p.Title != "Rota não encontrada" || p.RequestID == "" {
		t.Errorf("got %d %+v", res.StatusCode, p)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" || res.Header.Get("Content-Language") != "pt-BR" {
		t.Errorf("Content-Type %q Content-Language %q", ct, res.Header.Get("Content-Language"))
	}
	if up.calls() != 0 || h.limiter.calls() != 0 {
		t.Error("unrouted request reached the upstream or the limiter")
	}
	if h.requests(labelUnrouted, "404", "GET") != 1 {
		t.Error("unrouted 404 not counted")
	}
}

func TestUpstreamRefusedIs502AndTimeoutIs504(t *testing.T) {
	t.Parallel()
	held := make(chan struct{})
	t.Cleanup(func() { close(held) })
	slow := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.WriteHeader(200)
			http.NewResponseController(w).Flush()
			time.Sleep(300 * time.Millisecond) // body outlives the timeout: not cut
			io.WriteString(w, "done")
			return
		}
		// Held until the gateway gives up (its request is cancelled) or
		// the test ends: a 504 that arrives proves the timeout fired.
		select {
		case <-r.Context().Done():
		case <-held:
		}
	})
	slowRoute := onHosts(testRoute(t, "slow", slow.URL), "slow.example.org")
	slowRoute.Upstream.Timeout = 100 * time.Millisecond
	h := newHarness(t, routes(onHosts(testRoute(t, "down", "http://127.0.0.1:1"), "down.example.org"), slowRoute))
	res := h.do(t, h.newRequest(t, http.MethodGet, "down.example.org", "/"))
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 502 || !strings.Contains(string(body), "Não foi possível contatar") {
		t.Errorf("refused: %d %s", res.StatusCode, body)
	}
	if h.upstreamErrors("down", kindUnreachable) != 1 {
		t.Errorf("upstream_errors{down,unreachable} = %v", h.upstreamErrors("down", kindUnreachable))
	}
	res = h.do(t, h.newRequest(t, http.MethodGet, "slow.example.org", "/"))
	body, _ = io.ReadAll(res.Body)
	if res.StatusCode != 504 || !strings.Contains(string(body), "demorou demais") {
		t.Errorf("timeout: %d %s", res.StatusCode, body)
	}
	if h.upstreamErrors("slow", kindTimeout) != 1 {
		t.Errorf("upstream_errors{slow,timeout} = %v", h.upstreamErrors("slow", kindTimeout))
	}
	res = h.do(t, h.newRequest(t, http.MethodGet, "slow.example.org", "/stream"))
	body, _ = io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(body) != "done" {
		t.Errorf("stream longer than the timeout: %d %q", res.StatusCode, body)
	}
}

type fakeWebhook struct {
	calls atomic.Int32
	panic bool
}

func (f *fakeWebhook) Paths() []string { return []string{"/webhooks/whatsapp"} }
func (f *fakeWebhook) RedactPath(p string) string {
	if strings.HasPrefix(p, "/webhooks/whatsapp/t/") {
		return "/webhooks/whatsapp/t/[redacted]"
	}
	return p
}
func (f *fakeWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if f.panic {
		panic("boom")
	}
	w.Write([]byte(`{"status":"PUBLISHED_CONFIRMED"}`))
}

func TestWebhookPathsBeforeHostRouting(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	wh := &fakeWebhook{}
	h := newHarness(t, Options{
		EscapedSlashes: SlashesKeep, // %2F reaches routing, where it is no segment boundary
		Routes:         []Route{onHosts(testRoute(t, "portal", up.URL), "portal.example.org")},
	}, func(d *Deps) { d.Webhook = wh })
	for _, tc := range []struct {
		host, path string
		webhook    bool
	}{
		{"portal.example.org", "/webhooks/whatsapp", true},
		{"anything.example.net", "/webhooks/whatsapp/messages-upsert", true},
		{"portal.example.org", "/webhooks/whatsappx", false},
		{"portal.example.org", "/webhooks%2Fwhatsapp", false},
	} {
		before := wh.calls.Load()
		h.do(t, h.newRequest(t, http.MethodPost, tc.host, tc.path))
		if got := wh.calls.Load() > before; got != tc.webhook {
			t.Errorf("%s%s: webhook served = %v, want %v", tc.host, tc.path, got, tc.webhook)
		}
	}
	if h.limiter.calls() != 2 {
		t.Errorf("limiter calls = %d; webhooks are not rate limited by the edge", h.limiter.calls())
	}
	if h.requests(labelWebhook, "200", "POST") != 2 {
		t.Errorf("webhook requests counted = %v", h.requests(labelWebhook, "200", "POST"))
	}
}

func TestPanicIs500AndLogged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Options{}, func(d *Deps) { d.Webhook = &fakeWebhook{panic: true} })
	res := h.do(t, h.newRequest(t, http.MethodPost, "", "/webhooks/whatsapp"))
	if res.StatusCode != 500 {
		t.Errorf("status %d", res.StatusCode)
	}
	if !strings.Contains(h.logs.String(), "panic serving request") || h.requests(labelWebhook, "500", "POST") != 1 {
		t.Errorf("panic not logged/counted:\n%s", h.logs)
	}
}

func TestHealthReadinessAndDraining(t *testing.T) {
	t.Parallel()
	var brokerDown atomic.Bool
	brokerDown.Store(true)
	h := newHarness(t, Options{}, func(d *Deps) {
		d.Checks = map[string]func(context.Context) error{
			"webhook": func(context.Context) error {
				if brokerDown.Load() {
					return errors.New("amqp://guest:secret@broker: connection refused")
				}
				return nil
			},
		}
	})
	admin := httptest.NewServer(h.srv.AdminHandler())
	t.Cleanup(admin.Close)
	get := func(base, path string) (int, string) {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, base := range []string{h.front.URL, admin.URL} {
		if code, _ := get(base, "/healthz"); code != 200 {
			t.Errorf("%s/healthz = %d", base, code)
		}
		code, body := get(base, "/readyz")
		if code != 503 || !strings.Contains(body, `"not_ready":["webhook"]`) || strings.Contains(body, "secret") {
			t.Errorf("/readyz with broker down = %d %s", code, body)
		}
		if code, _ := get(base, "/readyz/proxy"); code != 200 {
			t.Errorf("/readyz/proxy = %d, want 200 while only the broker is down", code)
		}
		if code, _ := get(base, "/readyz/webhook"); code != 503 {
			t.Errorf("/readyz/webhook = %d", code)
		}
		if code, _ := get(base, "/readyz/nope"); code != 404 {
			t.Errorf("/readyz/nope = %d", code)
		}
	}
	// The admin listener says why (credentials in URLs redacted); the
	// public one never does.
	if _, body := get(admin.URL, "/readyz/webhook"); !strings.Contains(body, "connection refused") || strings.Contains(body, "secret") {
		t.Errorf("admin /readyz/webhook = %s, want the reason without the password", body)
	}
	if _, body := get(h.front.URL, "/readyz/webhook"); strings.Contains(body, "connection refused") {
		t.Errorf("public /readyz/webhook shows the reason: %s", body)
	}
	brokerDown.Store(false)
	if code, _ := get(h.front.URL, "/readyz"); code != 200 {
		t.Errorf("/readyz with broker up = %d", code)
	}
	h.srv.setDraining()
	if code, body := get(h.front.URL, "/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Errorf("draining /readyz = %d %s", code, body)
	}
	if code, _ := get(h.front.URL, "/readyz/proxy"); code != 503 {
		t.Errorf("draining /readyz/proxy = %d", code)
	}
	if code, _ := get(h.front.URL, "/healthz"); code != 200 {
		t.Errorf("draining /healthz = %d", code)
	}
}

// degradedErr is a check error that leaves its component ready
// (publish.DegradedError's shape).
type degradedErr struct{ msg string }

func (e degradedErr) Error() string  { return e.msg }
func (e degradedErr) Degraded() bool { return true }

// TestReadinessDegradedIsReadyWithWarnings (attack A25's migration): a
// check that answers a degraded error (queues kept with an earlier
// release's arguments) leaves the component ready, 200 "degraded"; only
// the admin listener shows the message, under "warnings", redacted.
func TestReadinessDegradedIsReadyWithWarnings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Options{}, func(d *Deps) {
		d.Checks = map[string]func(context.Context) error{
			"webhook": func(context.Context) error {
				return fmt.Errorf("wrapped: %w", degradedErr{"queues without x-overflow: q1 (amqp://guest:secret@broker)"})
			},
		}
	})
	admin := httptest.NewServer(h.srv.AdminHandler())
	t.Cleanup(admin.Close)
	for _, c := range []struct {
		base  string
		shown bool
	}{{h.front.URL, false}, {admin.URL, true}} {
		res, err := http.Get(c.base + "/readyz/webhook")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		body := string(b)
		if res.StatusCode != 200 || !strings.Contains(body, `"webhook":"degraded"`) || strings.Contains(body, "secret") {
			t.Errorf("%s/readyz/webhook = %d %s, want 200 degraded, no password", c.base, res.StatusCode, body)
		}
		if got := strings.Contains(body, `"warnings"`) && strings.Contains(body, "q1"); got != c.shown {
			t.Errorf("%s/readyz/webhook shows warnings = %v, want %v: %s", c.base, got, c.shown, body)
		}
	}
}

func TestMetricsOnlyOnAdmin(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(onHosts(testRoute(t, "portal", up.URL), "portal.example.org")))
	h.do(t, h.newRequest(t, http.MethodGet, "portal.example.org", "/"))
	res := h.do(t, h.newRequest(t, http.MethodGet, "", "/metrics"))
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 404 || strings.Contains(string(body), "borda_") {
		t.Errorf("public /metrics = %d %s", res.StatusCode, body)
	}
	admin := httptest.NewServer(h.srv.AdminHandler())
	t.Cleanup(admin.Close)
	res, err := http.Get(admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`borda_http_requests_total{code="200",method="GET",route="portal"} 1`,
		`borda_http_request_duration_seconds_bucket{route="portal"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("admin /metrics lacks %s", want)
		}
	}
	res, err = http.Get(admin.URL + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("/debug/pprof/ = %d", res.StatusCode)
	}
}

// bodyProbe reports whether anything read the request body.
type bodyProbe struct{ read atomic.Bool }

func (b *bodyProbe) Read(p []byte) (int, error) {
	b.read.Store(true)
	return copy(p, "x"), io.EOF
}

func TestBlockedRequestNeverReachesUpstreamNorReadsBody(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	h.limiter.decide = func(ratelimitSubject) ratelimitVerdict { return blockVerdict() }
	probe := &bodyProbe{}
	req := h.newRequest(t, http.MethodPost, "", "/upload")
	req.Body = io.NopCloser(probe)
	req.ContentLength = 1
	req.Header.Set("Expect", "100-continue")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(res.Body).Decode(&body)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "3" || body["status"] != float64(429) {
		t.Errorf("got %d Retry-After %q body %v", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if probe.read.Load() {
		t.Error("the request body was read (100 Continue sent) for a blocked request")
	}
	if up.calls() != 0 {
		t.Error("a blocked request reached the upstream")
	}
	if evs := h.rec.all(); len(evs) != 1 || !evs[0].Blocked || evs[0].Status != 429 || evs[0].Route != "api" || evs[0].Path != "/upload" {
		t.Errorf("telemetry = %+v", evs)
	}
}

func TestWouldBlockMarksResponseAndUpstreamAndStripsClientCopy(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	req := h.newRequest(t, http.MethodGet, "", "/")
	req.Header.Set("X-RateLimit-Would-Block", "true")
	res := h.do(t, req)
	if v := up.last(t).Header.Get("X-RateLimit-Would-Block"); v != "" {
		t.Errorf("client-sent would-block reached the upstream: %q", v)
	}
	if res.Header.Get("X-RateLimit-Limit") != "" {
		t.Error("rate-limit headers on a route without expose_headers")
	}
	h.limiter.decide = func(ratelimitSubject) ratelimitVerdict { return wouldBlockVerdict() }
	res = h.do(t, h.newRequest(t, http.MethodGet, "", "/"))
	if res.StatusCode != 200 || res.Header.Get("X-RateLimit-Would-Block") != "true" || res.Header.Get("X-RateLimit-Limit") != "5" {
		t.Errorf("would-block response: %d %v", res.StatusCode, res.Header)
	}
	if up.last(t).Header.Get("X-RateLimit-Would-Block") != "true" {
		t.Error("upstream not told about the would-block")
	}
	if evs := h.rec.all(); !evs[len(evs)-1].WouldBlock {
		t.Errorf("telemetry = %+v", evs[len(evs)-1])
	}
}

func TestRequestIDAndTraceparentPassThrough(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "upstream-own")
	})
	opts := routes(testRoute(t, "api", up.URL))
	opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} // a client id is kept from a trusted proxy only
	h := newHarness(t, opts)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req := h.newRequest(t, http.MethodGet, "", "/")
	req.Header.Set("X-Request-Id", "abc-123")
	req.Header.Set("Traceparent", tp)
	res := h.do(t, req)
	if got := res.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "abc-123" {
		t.Errorf("response X-Request-Id = %q", got)
	}
	seen := up.last(t).Header
	if seen.Get("X-Request-Id") != "abc-123" || seen.Get("Traceparent") != tp {
		t.Errorf("upstream X-Request-Id %q traceparent %q", seen.Get("X-Request-Id"), seen.Get("Traceparent"))
	}
	if !strings.Contains(h.logs.String(), `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
		t.Error("access log lacks the trace id")
	}
	req = h.newRequest(t, http.MethodGet, "", "/")
	req.Header.Set("X-Request-Id", "bad id\twith spaces")
	res = h.do(t, req)
	if id := res.Header.Get("X-Request-Id"); len(id) != 32 || id == up.last(t).Header.Get("X-Request-Id") == false {
		t.Errorf("generated X-Request-Id = %q (upstream %q)", id, up.last(t).Header.Get("X-Request-Id"))
	}
}

func TestAccessLogFieldsWithoutSecrets(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	req := h.newRequest(t, http.MethodGet, "", "/p?token=SECRET-QUERY")
	req.Header.Set("Authorization", "Bearer SECRET-BEARER")
	req.AddCookie(&http.Cookie{Name: "olp_auth", Value: "SECRET-COOKIE"})
	h.do(t, req)
	logs := h.logs.String()
	if strings.Contains(logs, "SECRET") {
		t.Errorf("secrets in the access log:\n%s", logs)
	}
	for _, want := range []string{`"msg":"http request"`, `"route":"api"`, `"status":200`, `"client_ip":"127.0.0.1"`, `"request_id":"`, `"duration_s":`, `"path":"/p"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("access log lacks %s:\n%s", want, logs)
		}
	}
}

// A provider that can only vary the URL sends its token in the path
// ({path}/t/{token}): the access log and the telemetry event carry the
// webhook's redacted path, never the token.
func TestWebhookPathTokenNeverReachesLogsOrTelemetry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Options{}, func(d *Deps) { d.Webhook = &fakeWebhook{} })
	h.do(t, h.newRequest(t, http.MethodPost, "", "/webhooks/whatsapp/t/SECRET-PATH-TOKEN"))
	if logs := h.logs.String(); strings.Contains(logs, "SECRET") || !strings.Contains(logs, "[redacted]") {
		t.Errorf("access log:\n%s", logs)
	}
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	for _, e := range h.rec.events {
		if strings.Contains(e.Path, "SECRET") {
			t.Errorf("telemetry event path %q carries the token", e.Path)
		}
	}
}

func TestCookiePolicyPerRoute(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	thirdparty := onHosts(under(testRoute(t, "thirdparty", up.URL), "/maps"), "portal.example.org")
	thirdparty.Cookies.Forward = []cookies.Forward{}
	h := newHarness(t, routes(onHosts(testRoute(t, "portal", up.URL), "portal.example.org"), thirdparty))
	send := func(path, auth string) captured {
		req := h.newRequest(t, http.MethodGet, "portal.example.org", path)
		req.Header.Set("Cookie", "olp_auth=tok.en.jwt; olp_mural=m; olp_other=x; theme=dark; broken")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if res := h.do(t, req); res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		return up.last(t)
	}
	got := send("/", "")
	if got.Header.Get("Authorization") != "Bearer tok.en.jwt" || got.Header.Get("Cookie") != "olp_mural=m; theme=dark; broken" {
		t.Errorf("portal: Authorization %q Cookie %q", got.Header.Get("Authorization"), got.Header.Get("Cookie"))
	}
	got = send("/", "Bearer own")
	if got.Header.Get("Authorization") != "Bearer own" {
		t.Errorf("own Authorization replaced: %q", got.Header.Get("Authorization"))
	}
	got = send("/maps/tile", "")
	if got.Header.Get("Authorization") != "" || got.Header.Get("Cookie") != "theme=dark; broken" {
		t.Errorf("third party: Authorization %q Cookie %q", got.Header.Get("Authorization"), got.Header.Get("Cookie"))
	}
}

func TestShutdownDrainsAndCancelsUpgradedConnections(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseAll() // a failed test does not leave the upstream handler waiting
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			wsEcho(t)(w, r)
			return
		}
		close(arrived)
		<-release // the request's work, still running once Shutdown has started
		io.WriteString(w, "finished")
	})
	cfg := routes(testRoute(t, "api", up.URL))
	srv := newServer(t, cfg, Deps{})
	hs := srv.HTTPServer("127.0.0.1:0", srv.Handler())
	front := httptest.NewUnstartedServer(hs.Handler)
	front.Config = hs
	front.Start()
	defer front.Close()

	// An upgraded connection that would never end by itself.
	res, conn, br := rawRequest(t, front.Listener.Addr().String(), "GET /ws HTTP/1.1\r\nHost: x\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	if res.StatusCode != 101 {
		t.Fatalf("upgrade: %d", res.StatusCode)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// A slow plain request in flight when shutdown starts.
	slow := make(chan string, 1)
	go func() {
		res, err := http.Get(front.URL + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		slow <- string(b)
	}()
	select { // the slow request is at the upstream: in flight when Shutdown starts
	case <-arrived:
	case got := <-slow:
		t.Fatalf("the slow request ended before reaching the upstream: %q", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx, 100*time.Millisecond, hs) }()
	if !eventually(t, 5*time.Second, srv.draining.Load) {
		t.Fatal("Shutdown did not start draining")
	}
	releaseAll()
	err := <-shut
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the deadline (a WebSocket was still open)", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Shutdown took %v", d)
	}
	if got := <-slow; got != "finished" {
		t.Errorf("in-flight request = %q, want it drained", got)
	}
	if _, err := readFrame(br); err == nil {
		t.Error("the upgraded connection is still open after Shutdown")
	}
	if !srv.draining.Load() {
		t.Error("not draining")
	}
}
