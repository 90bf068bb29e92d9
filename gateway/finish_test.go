package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
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
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", res.StatusCode)
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
