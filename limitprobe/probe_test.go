package limitprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGateway limits GETs to limit per window on a clock the probe's
// Sleep advances, answering 429s as docs/rate-limiting.md specifies,
// written here from the document, not from the gateway's code; drop
// removes one header (or "body") from its 429s.
type fakeGateway struct {
	mu     sync.Mutex
	now    time.Time
	start  time.Time
	count  int64
	limit  int64
	window time.Duration
	drop   string
}

func (g *fakeGateway) sleep(_ context.Context, d time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now = g.now.Add(d)
	return nil
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.now.Sub(g.start) >= g.window {
		g.start, g.count = g.now, 0
	}
	g.count++
	reset := int64((g.window - g.now.Sub(g.start) + time.Second - 1) / time.Second)
	h := w.Header()
	remaining := max(g.limit-g.count, 0)
	h.Set("X-RateLimit-Limit", fmt.Sprint(g.limit))
	h.Set("X-RateLimit-Remaining", fmt.Sprint(remaining))
	h.Set("X-RateLimit-Reset", fmt.Sprint(reset))
	h.Set("RateLimit-Policy", fmt.Sprintf(`"burst";q=%d;w=%d`, g.limit, int64(g.window/time.Second)))
	h.Set("RateLimit", fmt.Sprintf(`"burst";r=%d;t=%d`, remaining, reset))
	if g.count <= g.limit {
		return
	}
	h.Set("Retry-After", fmt.Sprint(reset))
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Language", "pt-BR")
	body, _ := json.Marshal(map[string]any{
		"type": ProblemType, "title": "Muitas requisições", "status": 429, "scope": "ip",
		"detail":            fmt.Sprintf("Muitas requisições deste endereço. Tente novamente em %d segundos.", reset),
		"violated-policies": []string{"burst"}, "retry_after": reset,
	})
	if g.drop == "body" {
		body = []byte("Too Many Requests")
	} else {
		h.Del(g.drop)
	}
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}

func probeFake(t *testing.T, drop string) Result {
	t.Helper()
	g := &fakeGateway{now: time.Unix(1_800_000_000, 0), limit: 5, window: 10 * time.Second, drop: drop}
	g.start = g.now
	srv := httptest.NewServer(g)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	return Probe(context.Background(), Options{BaseURL: base, Sleep: g.sleep}, Target{
		Rule: "burst", Scope: "ip", Limit: 5, Window: 10 * time.Second, Path: "/x",
		Message: "Muitas requisições deste endereço. Tente novamente em {retry_after} segundos.",
	})
}

func TestProbePassesAConformingGateway(t *testing.T) {
	if r := probeFake(t, ""); !r.OK() {
		t.Fatalf("checks failed against a conforming gateway: %+v", r.Failed())
	}
}

// Every part of the 429 the contract names is checked: a gateway that
// drops any one of them fails the probe on the check of that name.
func TestProbeFailsOnEachMissingPartOfThe429(t *testing.T) {
	for _, tc := range []struct{ drop, check string }{
		{"Retry-After", "Retry-After"},
		{"X-RateLimit-Limit", "X-RateLimit-Limit"},
		{"X-RateLimit-Remaining", "X-RateLimit-Remaining"},
		{"X-RateLimit-Reset", "X-RateLimit-Reset"},
		{"RateLimit-Policy", "RateLimit-Policy"},
		{"RateLimit", "RateLimit"},
		{"Content-Type", "Content-Type"},
		{"Content-Language", "Content-Language"},
		{"body", "problem body"},
	} {
		r := probeFake(t, tc.drop)
		var names []string
		for _, c := range r.Failed() {
			names = append(names, c.Name)
		}
		if r.OK() || !strings.Contains(strings.Join(names, ","), tc.check) {
			t.Errorf("without %s: failed checks %v, want %q among them", tc.drop, names, tc.check)
		}
	}
}

// A rule that never limits is reported within the request bound.
func TestProbeReportsARuleThatNeverLimits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	r := Probe(context.Background(), Options{BaseURL: base, MaxRequests: 30}, Target{Rule: "burst", Scope: "ip", Limit: 5, Window: time.Second, Path: "/"})
	if r.OK() || r.Requests != 30 || r.Failed()[0].Name != "limited" {
		t.Fatalf("got %+v", r)
	}
}

// A target that only redirects (the probe follows none) is reported as
// such, with the host it points to, beside the missing limit (fresh attack
// pass 22 E7: "the rule does not apply" and no word of the redirect).
func TestProbeNamesARedirectThatHidesTheLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://portal.example.org/login?next=CANARY", http.StatusFound)
	}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	r := Probe(context.Background(), Options{BaseURL: base, MaxRequests: 10}, Target{Rule: "burst", Scope: "ip", Limit: 5, Window: time.Second, Path: "/"})
	if r.OK() || len(r.Failed()) == 0 {
		t.Fatalf("got %+v, want a failed probe", r)
	}
	d := r.Failed()[0].Detail
	if !strings.Contains(d, "status 302, a redirect to portal.example.org") || strings.Contains(d, "CANARY") {
		t.Fatalf("detail %q: want the redirect and its host, without its query", d)
	}
}
