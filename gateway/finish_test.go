package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/telemetry"
)

// statusWebhook is an ingress that answers every event with status.
type statusWebhook struct{ status int }

func (statusWebhook) Paths() []string            { return []string{"/webhooks/whatsapp"} }
func (statusWebhook) RedactPath(p string) string { return p }
func (s statusWebhook) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(s.status)
	_, _ = w.Write([]byte(`{}`))
}

// accessLine is the access log line of path (fails the test without one).
func accessLine(t *testing.T, logs, path string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "http request" && m["path"] == path {
			return m
		}
	}
	t.Fatalf("no access log line for %s:\n%s", path, logs)
	return nil
}

// TestEveryExchangeIsRecordedWithItsRouteAndOutcome: each finished
// request is one telemetry event and one access log line that name its
// route (a proxied route's name, "webhook" for the ingress, none for an
// unrouted path), count as served only an upstream's answer or an event
// the ingress accepted (status < 400), and log at warn from status 500;
// and no request stays counted in flight (the drain waits on that
// count).
func TestEveryExchangeIsRecordedWithItsRouteAndOutcome(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/500":
			w.WriteHeader(500)
		case "/api/499":
			w.WriteHeader(499)
		default:
			_, _ = w.Write([]byte("0123456789"))
		}
	})
	for _, tc := range []struct {
		name       string
		webhook    int
		path       string
		status     int
		route      string
		served     bool
		level      string
		bytes      float64
		checkBytes bool
	}{
		{name: "proxied", path: "/api/ok", status: 200, route: "api", served: true, level: "INFO", bytes: 10, checkBytes: true},
		{name: "upstream 500", path: "/api/500", status: 500, route: "api", served: true, level: "WARN"},
		{name: "upstream 499", path: "/api/499", status: 499, route: "api", served: true, level: "INFO"},
		{name: "unrouted", path: "/elsewhere", status: 404, route: "", served: false, level: "INFO"},
		{name: "webhook accepted", webhook: 200, path: "/webhooks/whatsapp", status: 200, route: "webhook", served: true, level: "INFO"},
		{name: "webhook 399", webhook: 399, path: "/webhooks/whatsapp", status: 399, route: "webhook", served: true, level: "INFO"},
		{name: "webhook refused", webhook: 400, path: "/webhooks/whatsapp", status: 400, route: "webhook", served: false, level: "INFO"},
		{name: "webhook unavailable", webhook: 503, path: "/webhooks/whatsapp", status: 503, route: "webhook", served: false, level: "WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []harnessOpt
			if tc.webhook != 0 {
				opts = append(opts, func(d *Deps) { d.Webhook = statusWebhook{tc.webhook} })
			}
			h := newHarness(t, routes(under(testRoute(t, "api", up.URL), "/api")), opts...)
			method := http.MethodGet
			if tc.webhook != 0 {
				method = http.MethodPost
			}
			res := h.do(t, h.newRequest(t, method, "", tc.path))
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.status)
			}
			// The count leaves the chain last (after the event and the log
			// line): waiting on it proves both were written.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := h.srv.waitIdle(ctx); err != nil {
				t.Fatalf("a request stays counted in flight after its answer: %d", h.srv.inFlight.Load())
			}
			events := h.rec.all()
			if len(events) != 1 {
				t.Fatalf("%d telemetry events, want 1: %+v", len(events), events)
			}
			want := telemetry.Event{Route: tc.route, Path: tc.path, Status: tc.status, Served: tc.served}
			if e := events[0]; e.Route != want.Route || e.Path != want.Path || e.Status != want.Status || e.Served != want.Served {
				t.Errorf("event %+v, want route %q path %q status %d served %v", e, want.Route, want.Path, want.Status, want.Served)
			}
			line := accessLine(t, h.logs.String(), tc.path)
			label := tc.route
			if label == "" {
				label = labelUnrouted
			}
			if line["level"] != tc.level || line["route"] != label || line["status"] != float64(tc.status) {
				t.Errorf("access log %v, want level %s route %s status %d", line, tc.level, label, tc.status)
			}
			if tc.checkBytes && line["bytes"] != tc.bytes {
				t.Errorf("access log bytes %v, want %v", line["bytes"], tc.bytes)
			}
		})
	}
}

// TestWebhookPathWithAnEscapedSlashFollowsTheSlashPolicy: a webhook path
// holding %2F is refused 400 under the default policy (the ingress never
// sees it, and the refusal is recorded as the webhook's), and reaches the
// ingress under SlashesKeep; a plain webhook path reaches it under both.
func TestWebhookPathWithAnEscapedSlashFollowsTheSlashPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy  SlashPolicy
		path    string
		reaches bool
	}{
		{SlashesDefault, "/webhooks/whatsapp/a%2Fb", false},
		{SlashesReject, "/webhooks/whatsapp/a%2Fb", false},
		{SlashesKeep, "/webhooks/whatsapp/a%2Fb", true},
		{SlashesDefault, "/webhooks/whatsapp/a", true},
		{SlashesReject, "/webhooks/whatsapp/a", true},
	} {
		wh := &fakeWebhook{}
		h := newHarness(t, Options{EscapedSlashes: tc.policy}, func(d *Deps) { d.Webhook = wh })
		res := h.do(t, h.newRequest(t, http.MethodPost, "", tc.path))
		if got := wh.calls.Load() == 1; got != tc.reaches || (res.StatusCode == 400) == tc.reaches {
			t.Errorf("policy %v, %s: status %d, ingress called %v; want it called %v", tc.policy, tc.path, res.StatusCode, got, tc.reaches)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := h.srv.waitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if e := h.rec.all(); len(e) != 1 || e[0].Route != labelWebhook {
			t.Errorf("policy %v, %s: events %+v, want one on the webhook's route", tc.policy, tc.path, e)
		}
		for _, l := range strings.Split(h.logs.String(), "\n") {
			if strings.Contains(l, `"msg":"http request"`) && !strings.Contains(l, `"route":"webhook"`) {
				t.Errorf("policy %v, %s: access log %s, want the webhook's route", tc.policy, tc.path, l)
			}
		}
	}
}

// TestAnAnswerBeforeTheBodyReleasesTheConnectionAtOnce: a request refused
// before its body was read (here unrouted, 404) whose client stalls
// mid-body is answered, and the connection is closed right after, instead
// of net/http waiting on the rest of the body to reuse it (up to 256 KiB,
// for as long as the client trickles).
func TestAnAnswerBeforeTheBodyReleasesTheConnectionAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Options{})
	c, err := net.Dial("tcp", h.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound || !res.Close {
		t.Fatalf("status %d, Connection: close %v; want 404 announcing the close", res.StatusCode, res.Close)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the answer: %v, want the server to close the connection (EOF)", err)
	}
}

// TestExposedRouteCarriesTheLimitOnAllowedAnswers: a route with
// expose_headers tells the client its limit on an allowed answer
// (RateLimit-* of docs/rate-limiting.md); a route without it does not,
// and neither does an answer no rule decided.
func TestExposedRouteCarriesTheLimitOnAllowedAnswers(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	exposed := under(testRoute(t, "exposed", up.URL), "/exposed")
	exposed.ExposeHeaders = true
	h := newHarness(t, routes(exposed, under(testRoute(t, "quiet", up.URL), "/quiet")))
	allowed := func(ratelimitSubject) ratelimitVerdict {
		return ratelimit.Verdict{Decisions: []ratelimit.Decision{{Rule: "burst", Scope: ratelimit.ScopeIP,
			Outcome: ratelimit.OutcomeAllow, Limit: 10, Remaining: 7, Window: 5 * time.Second, ResetAfter: 2 * time.Second}}}
	}
	for _, tc := range []struct {
		path    string
		decided bool
		want    string
	}{
		{"/exposed/a", true, "10"},
		{"/exposed/a", false, ""},
		{"/quiet/a", true, ""},
	} {
		h.limiter.mu.Lock()
		h.limiter.decide = nil
		if tc.decided {
			h.limiter.decide = allowed
		}
		h.limiter.mu.Unlock()
		res := h.do(t, h.newRequest(t, http.MethodGet, "", tc.path))
		if res.StatusCode != 200 || res.Header.Get("X-RateLimit-Limit") != tc.want {
			t.Errorf("%s (decided %v): %d, X-RateLimit-Limit %q; want 200 and %q", tc.path, tc.decided, res.StatusCode, res.Header.Get("X-RateLimit-Limit"), tc.want)
		}
		if tc.want != "" && res.Header.Get("X-RateLimit-Remaining") != "7" {
			t.Errorf("%s: X-RateLimit-Remaining %q, want 7", tc.path, res.Header.Get("X-RateLimit-Remaining"))
		}
	}
}

// TestTraceIDIsReadOnlyFromAWellFormedTraceparent: the access log's
// trace_id is the trace-id of a W3C traceparent
// (00-<32 hex>-<16 hex>-<2 hex>), and nothing for a header of another
// shape or the invalid all-zero id.
func TestTraceIDIsReadOnlyFromAWellFormedTraceparent(t *testing.T) {
	const id, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for tp, want := range map[string]string{
		"00-" + id + "-" + span + "-01":                       id,
		"00-" + id + "-" + span + "-01-extra":                 id, // a later version's longer header
		"":                                                    "",
		"00-" + id + "-" + span + "-0":                        "", // 54 bytes
		"00_" + id + "-" + span + "-01":                       "",
		"00-" + id + "_" + span + "-01":                       "",
		"00-" + id + "-" + span + "_01":                       "",
		"00-" + id[:31] + "g-" + span + "-01":                 "",
		"00-g" + id[1:] + "-" + span + "-01":                  "",
		"00-00000000000000000000000000000000-" + span + "-01": "",
	} {
		if got := traceID(tp); got != want {
			t.Errorf("traceID(%q) = %q, want %q", tp, got, want)
		}
	}
}

// TestClientIPHeaderOfAnySpellingNamesTheClient: client_ip_header,
// spelled in any case, is read from a trusted proxy and names the client
// the limiter counts; without it, the X-Forwarded-For walk does.
func TestClientIPHeaderOfAnySpellingNamesTheClient(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, tc := range []struct{ header, want string }{
		{"x-real-ip", "198.51.100.20"},
		{"X-REAL-IP", "198.51.100.20"},
		{"", "198.51.100.21"},
	} {
		o := routes(testRoute(t, "api", up.URL))
		o.TrustedProxies, o.ClientIPHeader = loopback, tc.header
		h := newHarness(t, o)
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header.Set("X-Real-Ip", "198.51.100.20")
		req.Header.Set("X-Forwarded-For", "198.51.100.21")
		h.do(t, req)
		h.limiter.mu.Lock()
		subjects := append([]ratelimitSubject(nil), h.limiter.subjects...)
		h.limiter.mu.Unlock()
		if len(subjects) != 1 || subjects[0].IP != tc.want {
			t.Errorf("client_ip_header %q: limiter subjects %+v, want IP %s", tc.header, subjects, tc.want)
		}
	}
}

type degradedError struct{}

func (degradedError) Error() string  { return "queues kept with the arguments of release 1.2" }
func (degradedError) Degraded() bool { return true }

// TestReadinessShowsDegradedComponentsAsWarnings: a check failing with a
// Degraded() error leaves its component ready ("degraded"); the admin
// listener lists its message under "warnings", beside the not-ready
// components' "errors"; neither key is sent when it would be empty, and
// the public listener never sends either.
func TestReadinessShowsDegradedComponentsAsWarnings(t *testing.T) {
	t.Parallel()
	var brokerDown atomic.Bool
	checks := map[string]func(context.Context) error{
		"webhook": func(context.Context) error { return degradedError{} },
		"store":   func(context.Context) error { return nil },
		"broker": func(context.Context) error {
			if brokerDown.Load() {
				return errors.New("connection refused")
			}
			return nil
		},
	}
	h := newHarness(t, Options{}, func(d *Deps) { d.Checks = checks })
	admin := httptest.NewServer(h.srv.AdminHandler())
	t.Cleanup(admin.Close)
	get := func(base, path string) (int, map[string]any) {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body
	}
	for _, tc := range []struct {
		down        bool
		path        string
		code        int
		errs, warns bool // the admin listener's keys
	}{
		{false, "/readyz", 200, false, true},
		{false, "/readyz/store", 200, false, false},
		{true, "/readyz", 503, true, true},
		{true, "/readyz/broker", 503, true, false},
		{false, "/readyz/webhook", 200, false, true},
	} {
		brokerDown.Store(tc.down)
		code, body := get(admin.URL, tc.path)
		_, errs := body["errors"]
		_, warns := body["warnings"]
		if code != tc.code || errs != tc.errs || warns != tc.warns {
			t.Errorf("admin %s (broker down %v) = %d %v; want %d, errors %v, warnings %v", tc.path, tc.down, code, body, tc.code, tc.errs, tc.warns)
		}
		if c, ok := body["components"].(map[string]any); ok && c["webhook"] != nil && c["webhook"] != "degraded" {
			t.Errorf("admin %s: webhook is %v, want degraded", tc.path, c["webhook"])
		}
		code, body = get(h.front.URL, tc.path)
		_, errs = body["errors"]
		_, warns = body["warnings"]
		if code != tc.code || errs || warns {
			t.Errorf("public %s = %d %v; want %d without errors or warnings", tc.path, code, body, tc.code)
		}
	}
}

// TestProbeWithABodyClosesTheConnection: a probe never reads a body, so
// one sent with a body is answered with Connection: close (its body is
// never waited for); a probe without one keeps the connection.
func TestProbeWithABodyClosesTheConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Options{})
	for _, path := range []string{"/healthz", "/readyz", "/readyz/x"} {
		for _, body := range []string{"", "hello"} {
			var rd io.Reader
			if body != "" {
				rd = strings.NewReader(body)
			}
			req, err := http.NewRequest(http.MethodGet, h.front.URL+path, rd)
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.front.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.Close != (body != "") {
				t.Errorf("%s with body %q: Connection close %v, want %v", path, body, res.Close, body != "")
			}
		}
	}
}
