package ingress

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// rawReq sends a POST whose headers are given as lines (so a field can
// repeat) from client (RemoteAddr host).
func rawReq(i http.Handler, target, client string, lines ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(`{"a":1}`))
	r.RemoteAddr = client + ":40000"
	r.Header.Set("Content-Type", "application/json")
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ": ")
		r.Header.Add(k, v) // canonicalizes, as the server does for "authorization"
	}
	w := httptest.NewRecorder()
	i.ServeHTTP(w, r)
	return w
}

// Every credential form given twice is ambiguous: 401, whatever the
// values, whatever the letter case of the field name.
func TestCredentialGivenTwiceIsRefused(t *testing.T) {
	const base = "/webhooks/whatsapp"
	tests := []struct {
		name   string
		target string
		lines  []string
	}{
		{"two Authorization lines, right then wrong", base, []string{"Authorization: Bearer test-token", "Authorization: Bearer nope"}},
		{"two Authorization lines, wrong then right", base, []string{"authorization: Bearer nope", "AUTHORIZATION: Bearer test-token"}},
		{"two Authorization lines, same value", base, []string{"Authorization: Bearer test-token", "authorization: Bearer test-token"}},
		{"Basic then Bearer", base, []string{"Authorization: Basic dGVzdA==", "Authorization: Bearer test-token"}},
		{"two X-Webhook-Token, different", base, []string{"X-Webhook-Token: test-token", "x-webhook-token: nope"}},
		{"two X-Webhook-Token, same", base, []string{"X-Webhook-Token: test-token", "X-WEBHOOK-TOKEN: test-token"}},
		{"two apikey, different", base, []string{"apikey: nope", "Apikey: test-token"}},
		{"two apikey, same", base, []string{"apikey: test-token", "APIKEY: test-token"}},
		{"query token twice, different", base + "?token=test-token&token=nope", nil},
		{"query token twice, same", base + "?token=test-token&token=test-token", nil},
		{"query token twice, first blank", base + "?token=&token=test-token", nil},
		{"query token twice, percent-encoded key", base + "?token=test-token&%74oken=nope", nil},
		{"query token twice, Evolution suffix", base + "?token=test-token&token=nope/messages-upsert", nil},
		{"path token twice", base + "/t/test-token/t/nope", nil},
		{"path token twice, same", base + "/t/test-token/t/test-token", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := &fakePublisher{}
			i, _ := newUnitIngress(t, unitConfig(), pub)
			w := rawReq(i, tt.target, "192.0.2.1", tt.lines...)
			expect(t, w, 401, StatusUnauthorized)
			if n := len(pub.messages()); n != 0 {
				t.Fatalf("%d messages published", n)
			}
			if got := value(t, i.metrics.authFailures.WithLabelValues(authRepeated)); got != 1 {
				t.Errorf("auth failures{repeated} = %v, want 1", got)
			}
		})
	}
	// Different forms with the same value stay accepted (docs/webhooks.md §2).
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	w := rawReq(i, base+"/t/test-token?token=test-token", "192.0.2.1", "Authorization: Bearer test-token", "X-Webhook-Token: test-token")
	expect(t, w, 200, StatusPublishedConfirmed)
}

func throttleConfigIngress(t *testing.T, perIP, perSource int) (*Ingress, *time.Time) {
	t.Helper()
	cfg := unitConfig()
	cfg.AuthFailures.PerIP = perIP
	cfg.AuthFailures.PerSource = perSource
	cfg.AuthFailures.Window = time.Minute
	i, _ := newUnitIngress(t, cfg, &fakePublisher{})
	at := time.Unix(1767225600, 0)
	i.now = func() time.Time { return at }
	return i, &at
}

// 1 000 wrong tokens from one IP used to get 1 000 × 401 and a log line
// each: past per_ip failures they get 429 AUTH_THROTTLED with Retry-After,
// while the right token from the same IP is still accepted.
func TestWrongTokenFloodFromOneIPIsThrottled(t *testing.T) {
	i, at := throttleConfigIngress(t, 20, 100000)
	for n := 1; n <= 1000; n++ {
		w := rawReq(i, "/webhooks/whatsapp", "192.0.2.7", "Authorization: Bearer wrong")
		switch {
		case n <= 20 && w.Code != 401:
			t.Fatalf("failure %d: %d, want 401 under the limit", n, w.Code)
		case n > 20 && w.Code != 429:
			t.Fatalf("failure %d: %d %s, want 429", n, w.Code, w.Body.String())
		}
		if n == 21 {
			if ra := w.Header().Get("Retry-After"); ra != "3" { // 60 s / 20
				t.Errorf("Retry-After %q, want 3", ra)
			}
			body := w.Body.String()
			if !strings.Contains(body, `"status":"AUTH_THROTTLED"`) || !strings.Contains(body, "Tente novamente em 3 segundos") || !strings.Contains(body, `"retry_after":3`) {
				t.Errorf("429 body %s", body)
			}
		}
	}
	if got := value(t, i.metrics.authThrottled.WithLabelValues("ip")); got != 980 {
		t.Errorf("throttled{ip} = %v, want 980", got)
	}
	if got := value(t, i.metrics.authFailures.WithLabelValues(authMismatch)); got != 1000 {
		t.Errorf("failures{mismatch} = %v, want 1000", got)
	}
	// A valid token from the throttled IP is accepted (a neighbour behind
	// the same NAT must not block the provider).
	expect(t, rawReq(i, "/webhooks/whatsapp", "192.0.2.7", "Authorization: Bearer test-token"), 200, StatusPublishedConfirmed)
	// Another IP is not affected.
	expect(t, rawReq(i, "/webhooks/whatsapp", "192.0.2.8", "Authorization: Bearer wrong"), 401, StatusUnauthorized)
	// Refused failures do not extend the wait: 3 s later one more is a 401.
	*at = at.Add(3 * time.Second)
	expect(t, rawReq(i, "/webhooks/whatsapp", "192.0.2.7"), 401, StatusUnauthorized)
	expect(t, rawReq(i, "/webhooks/whatsapp", "192.0.2.7"), 429, StatusAuthThrottled)
}

// Every failure reason counts: missing, conflicting, repeated credentials.
func TestEveryAuthFailureReasonCountsTowardsTheThrottle(t *testing.T) {
	i, _ := throttleConfigIngress(t, 3, 100000)
	rawReq(i, "/webhooks/whatsapp", "192.0.2.9")
	rawReq(i, "/webhooks/whatsapp?token=nope", "192.0.2.9", "Authorization: Bearer test-token")
	rawReq(i, "/webhooks/whatsapp?token=a&token=b", "192.0.2.9")
	expect(t, rawReq(i, "/webhooks/whatsapp", "192.0.2.9", "X-Webhook-Token: nope"), 429, StatusAuthThrottled)
	for reason, want := range map[string]float64{authMissing: 1, authConflict: 1, authRepeated: 1, authMismatch: 1} {
		if got := value(t, i.metrics.authFailures.WithLabelValues(reason)); got != want {
			t.Errorf("failures{%s} = %v, want %v", reason, got, want)
		}
	}
}

// A guess spread over many addresses is caught by the per-source limit,
// and the address LRU stays bounded.
func TestWrongTokenSprayOverManyIPsIsThrottledPerSource(t *testing.T) {
	cfg := unitConfig()
	cfg.AuthFailures.PerIP = 5
	cfg.AuthFailures.PerSource = 50
	cfg.AuthFailures.MaxClients = 16
	i, _ := newUnitIngress(t, cfg, &fakePublisher{})
	at := time.Unix(1767225600, 0)
	i.now = func() time.Time { return at }
	codes := map[int]int{}
	for n := range 500 {
		ip := "198.51.100." + itoa(n%250)
		codes[rawReq(i, "/webhooks/whatsapp/t/guess"+itoa(n), ip).Code]++
	}
	if codes[401] != 50 || codes[429] != 450 {
		t.Errorf("answers %v, want 50 × 401 then 450 × 429", codes)
	}
	if got := value(t, i.metrics.authThrottled.WithLabelValues("source")); got != 450 {
		t.Errorf("throttled{source} = %v, want 450", got)
	}
	if n := i.throttle.ips.Len(); n > 16 {
		t.Errorf("%d client IPs remembered, want at most max_clients 16", n)
	}
	expect(t, rawReq(i, "/webhooks/whatsapp/t/test-token", "198.51.100.1"), 200, StatusPublishedConfirmed)
}

// A signed source's bad signatures count too (after the body is read).
func TestBadSignatureFloodIsThrottled(t *testing.T) {
	cfg := unitConfig()
	cfg.Sources = nil // no flat source
	cfg.AuthFailures.PerIP = 2
	cfg.addSources([]Source{{Name: "gh", Path: "/hooks/github",
		Signature: &Signature{Scheme: "github", Secrets: []string{"s3cret"}, Tolerance: time.Minute}}}...)
	i, _ := newUnitIngress(t, cfg, &fakePublisher{})
	sig := "X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64)
	expect(t, rawReq(i, "/hooks/github", "192.0.2.3", sig), 401, StatusUnauthorized)
	expect(t, rawReq(i, "/hooks/github", "192.0.2.3"), 401, StatusUnauthorized)
	expect(t, rawReq(i, "/hooks/github", "192.0.2.3", sig), 429, StatusAuthThrottled)
	if got := value(t, i.metrics.authFailures.WithLabelValues(authSignatureInvalid)); got != 2 {
		t.Errorf("failures{signature_invalid} = %v, want 2", got)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestDefaultClientIsTheAddressNotTheConnection: without SetClientIP (or
// when its function names no client) a request's client is the host of
// RemoteAddr, never host:port, which would make every connection a new
// client with a fresh failed-authentication allowance and body share.
func TestDefaultClientIsTheAddressNotTheConnection(t *testing.T) {
	for remote, want := range map[string]string{
		"10.0.0.1:1234":       "10.0.0.1",
		"10.0.0.1:4321":       "10.0.0.1",
		"[2001:db8::1]:443":   "2001:db8::1",
		"@unix-socket-client": "@unix-socket-client",
	} {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/x", nil)
		r.RemoteAddr = remote
		if got := peerIP(r); got != want {
			t.Errorf("peerIP(%q) = %q, want %q", remote, got, want)
		}
		i := &Ingress{clientIP: peerIP}
		i.SetClientIP(func(*http.Request) string { return "" })
		if got := i.clientIP(r); got != want {
			t.Errorf("clientIP(%q) with a resolver that names nothing = %q, want %q", remote, got, want)
		}
	}
}

// TestAuthFailureLimitsTakeTheirSmallestValues: New accepts the smallest
// throttle (one failure per IP and per source, one client tracked, a 1 ns
// window) and refuses anything below it, naming the setting.
func TestAuthFailureLimitsTakeTheirSmallestValues(t *testing.T) {
	smallest := AuthFailures{PerIP: 1, PerSource: 1, MaxClients: 1, Window: time.Nanosecond}
	cfg := unitConfig()
	cfg.AuthFailures = smallest
	if _, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry()); err != nil {
		t.Fatalf("New with the smallest auth-failure throttle: %v", err)
	}
	for name, below := range map[string]func(*AuthFailures){
		"per_ip 0":      func(a *AuthFailures) { a.PerIP = 0 },
		"per_source 0":  func(a *AuthFailures) { a.PerSource = 0 },
		"max_clients 0": func(a *AuthFailures) { a.MaxClients = 0 },
		"window 0":      func(a *AuthFailures) { a.Window = 0 },
		"window -1s":    func(a *AuthFailures) { a.Window = -time.Second },
	} {
		cfg := unitConfig()
		cfg.AuthFailures = smallest
		below(&cfg.AuthFailures)
		_, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry())
		if err == nil || !strings.Contains(err.Error(), "auth failures") {
			t.Errorf("%s: New = %v, want the auth-failures error", name, err)
		}
	}
}

// TestFailureRefusedByTheSourceIsNotChargedToTheIP: a failure the
// source's limit refuses costs the client's own allowance nothing, and
// no more than nothing: afterwards the client has exactly what it had.
func TestFailureRefusedByTheSourceIsNotChargedToTheIP(t *testing.T) {
	a := newAuthThrottle(2, 3, 10, time.Minute) // 30 s per IP failure, 20 s per source failure
	t0 := time.Unix(1_700_000_000, 0)
	for _, client := range []string{"a", "b", "c"} { // the source's three
		if v := a.fail("src", client, t0); v.wait != 0 {
			t.Fatalf("failure %s at t0 refused: %+v", client, v)
		}
	}
	if v := a.fail("src", "a", t0); v.scope != "source" || v.wait != 20*time.Second {
		t.Fatalf("a's second failure at t0 = %+v, want refused by the source for 20s", v)
	}
	// 20 s on the source has room for one; a has used one of its two.
	t1 := t0.Add(20 * time.Second)
	if v := a.fail("src", "a", t1); v.wait != 0 {
		t.Fatalf("a's failure at t0+20s = %+v, want it counted", v)
	}
	// a has now used both: the next is the IP's refusal, 10 s to wait.
	if v := a.fail("src", "a", t1); v.scope != "ip" || v.wait != 10*time.Second {
		t.Errorf("a's third counted failure = %+v, want refused by its IP limit for 10s", v)
	}
}
