package adminui

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

const testToken = "0123456789abcdef0123456789abcdef"

type fakeRoutes []Route

func (f fakeRoutes) Routes() []Route { return f }

type fakeLimiter LimiterState

func (f fakeLimiter) Limiter(context.Context) LimiterState { return LimiterState(f) }

type fakePipeline PipelineState

func (f fakePipeline) Pipeline(context.Context) PipelineState { return PipelineState(f) }

type fakeLetters struct {
	mu      sync.Mutex
	letters []DeadLetter
	lists   int
	replays []ReplayRequest
	err     error
	listErr error
}

func (f *fakeLetters) List(context.Context, int) ([]DeadLetter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return f.letters, f.listErr
}

func (f *fakeLetters) Replay(_ context.Context, req ReplayRequest) (ReplayResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return ReplayResult{}, f.err
	}
	for _, l := range f.letters {
		if l.ID == req.ID {
			f.replays = append(f.replays, req)
			return ReplayResult{AuditID: 7, Outcome: "republished"}, nil
		}
	}
	return ReplayResult{}, ErrNotFound
}

func testPage(t *testing.T, token string, letters *fakeLetters) *Page {
	t.Helper()
	p, err := New(Sources{
		Routes: fakeRoutes{{Name: "portal", PathPrefix: "/", Upstream: "http://127.0.0.1:3000",
			Rules: []Rule{{Name: "api", Scope: "user", Algorithm: "gcra", Mode: "observe", Limit: 50, Window: time.Minute}},
			CORS:  "portal: origins https://app.example", Cookies: []string{"olp_auth → Authorization: Bearer"}}},
		Limiter: fakeLimiter{Store: "redis", StoreState: "ok", Breaker: "closed", Span: 5 * time.Minute,
			Relaxes:       []Relax{{Rule: "api", Factor: 2, Until: time.Now().Add(time.Hour)}},
			Rules:         []RuleCounts{{Rule: "api", Decisions: 120, WouldBlocks: 9}},
			TopWouldBlock: []EndpointCount{{Endpoint: "portal:/api/alunos/{id}", Count: 9}}},
		Pipeline: fakePipeline{Configured: true, Broker: Broker{Connected: true},
			Queues: []Queue{{Name: "legacy-forward", Role: "forward", Depth: 3}},
			Forwarders: []Forwarder{{Instance: "fwd-1", Breaker: "open", OpenedBy: "5xx (HTTP 503): upstream down",
				LastFailure: "timeout", LastFailureAt: time.Now(), Problems: []string{"breaker: open"}}}},
		DeadLetters: letters,
	}, Options{Token: token, ListCacheFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// do serves req; a request of httptest's default host (example.com) is
// addressed as an operator does, to the loopback listener.
func do(t *testing.T, h http.Handler, req *http.Request) (*http.Response, string) {
	t.Helper()
	if req.Host == "example.com" {
		req.Host = "127.0.0.1:9091"
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func replayForm(id, operator, reason, token string) *http.Request {
	form := url.Values{"id": {id}, "operator": {operator}, "reason": {reason}, "token": {token}}
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9091/ui/dead-letters/replay", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://127.0.0.1:9091")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return req
}

func TestOverviewShowsRoutesLimiterPipelineAndForwarders(t *testing.T) {
	p := testPage(t, testToken, &fakeLetters{})
	res, body := do(t, p.Handler(), httptest.NewRequest(http.MethodGet, "/ui", nil))
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /ui = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, want := range []string{"portal", "http://127.0.0.1:3000", "observe", "api", "100 / 1m00s per user", "origins https://app.example",
		"olp_auth → Authorization: Bearer", "×2", "portal:/api/alunos/{id}", "legacy-forward", "fwd-1", "5xx (HTTP 503): upstream down"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	if strings.Contains(body, "<script") {
		t.Error("the page has a script")
	}
}

func TestHostileEventIDAndExcerptAreEscaped(t *testing.T) {
	letters := &fakeLetters{letters: []DeadLetter{{
		ID: `"><script>alert(1)</script>`, Source: `<b>evo</b>`, Reason: "rejected by the legacy endpoint",
		Status: 422, Excerpt: `<img src=x onerror=alert(2)>`, BodyPreview: `{"x":"</pre><script>alert(3)</script>"}`,
	}}}
	p := testPage(t, testToken, letters)
	_, body := do(t, p.Handler(), httptest.NewRequest(http.MethodGet, "/ui/dead-letters", nil))
	for _, raw := range []string{"<script>", "<img src=x", "<b>evo</b>", `value=""><`} {
		if strings.Contains(body, raw) {
			t.Errorf("page holds unescaped %q", raw)
		}
	}
	for _, esc := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(2)&gt;", "&lt;b&gt;evo&lt;/b&gt;"} {
		if !strings.Contains(body, esc) {
			t.Errorf("page lacks escaped %q", esc)
		}
	}
}

func TestReplayNeedsTheOperatorToken(t *testing.T) {
	letters := &fakeLetters{letters: []DeadLetter{{ID: "evt-1"}}}
	h := testPage(t, testToken, letters).Handler()
	for _, token := range []string{"", "wrong", testToken[:31], testToken + "x"} {
		res, _ := do(t, h, replayForm("evt-1", "ana", "endpoint fixed", token))
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("token %q: status %d, want 403", token, res.StatusCode)
		}
	}
	if len(letters.replays) != 0 {
		t.Fatalf("replayed without the token: %v", letters.replays)
	}
}

func TestReadOnlyWithoutTokenShowsNoFormAndRefusesReplay(t *testing.T) {
	letters := &fakeLetters{letters: []DeadLetter{{ID: "evt-1"}}}
	h := testPage(t, "", letters).Handler()
	_, body := do(t, h, httptest.NewRequest(http.MethodGet, "/ui/dead-letters", nil))
	if strings.Contains(body, "<form") || !strings.Contains(body, "read-only") {
		t.Error("read-only page shows a replay form or no read-only notice")
	}
	res, _ := do(t, h, replayForm("evt-1", "ana", "endpoint fixed", ""))
	if res.StatusCode != http.StatusForbidden || len(letters.replays) != 0 {
		t.Fatalf("read-only replay: status %d, replays %v", res.StatusCode, letters.replays)
	}
}

func TestReplayRefusesACrossSiteForm(t *testing.T) {
	letters := &fakeLetters{letters: []DeadLetter{{ID: "evt-1"}}}
	h := testPage(t, testToken, letters).Handler()
	for name, mutate := range map[string]func(*http.Request){
		"foreign origin":     func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") },
		"null origin":        func(r *http.Request) { r.Header.Set("Origin", "null") },
		"cross-site fetch":   func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") },
		"same-site fetch":    func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-site") },
		"origin other port":  func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:8080") },
		"fetch site, no Org": func(r *http.Request) { r.Header.Del("Origin"); r.Header.Set("Sec-Fetch-Site", "cross-site") },
	} {
		req := replayForm("evt-1", "ana", "endpoint fixed", testToken)
		mutate(req)
		if res, _ := do(t, h, req); res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", name, res.StatusCode)
		}
	}
	if len(letters.replays) != 0 {
		t.Fatalf("a cross-site form replayed: %v", letters.replays)
	}
}

func TestReplayNeedsAnIDAnOperatorAndAReason(t *testing.T) {
	letters := &fakeLetters{letters: []DeadLetter{{ID: "evt-1"}}}
	h := testPage(t, testToken, letters).Handler()
	for _, f := range [][3]string{{"", "ana", "fixed"}, {"evt-1", "", "fixed"}, {"evt-1", "ana", "  "}} {
		if res, _ := do(t, h, replayForm(f[0], f[1], f[2], testToken)); res.StatusCode != http.StatusBadRequest {
			t.Errorf("form %q: status %d, want 400", f, res.StatusCode)
		}
	}
	if len(letters.replays) != 0 {
		t.Fatalf("replayed an incomplete form: %v", letters.replays)
	}
}

func TestReplayRedirectsToTheListingWithTheAuditRow(t *testing.T) {
	letters := &fakeLetters{letters: []DeadLetter{{ID: "evt/1 & <2>"}}}
	h := testPage(t, testToken, letters).Handler()
	res, _ := do(t, h, replayForm("evt/1 & <2>", "ana", "endpoint fixed", testToken))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303", res.StatusCode)
	}
	loc := res.Header.Get("Location")
	if want := "/ui/dead-letters?replayed=evt%2F1+%26+%3C2%3E&audit=7&sig="; !strings.HasPrefix(loc, want) {
		t.Fatalf("Location %q, want it to start with %q", loc, want)
	}
	if len(letters.replays) != 1 || letters.replays[0] != (ReplayRequest{ID: "evt/1 & <2>", Operator: "ana", Reason: "endpoint fixed"}) {
		t.Fatalf("replays %v", letters.replays)
	}
	_, body := do(t, h, httptest.NewRequest(http.MethodGet, loc, nil))
	if !strings.Contains(body, "Replayed <code>evt/1 &amp; &lt;2&gt;</code>") || !strings.Contains(body, "#7") {
		t.Errorf("listing after the replay does not say so:\n%s", body)
	}
}

// A crafted link cannot make the page claim a replay: the confirmation
// shows only with the signature the replay's own 303 carries.
func TestAForgedReplayConfirmationIsNotShown(t *testing.T) {
	letters := &fakeLetters{letters: []DeadLetter{{ID: "evt-1"}}}
	h := testPage(t, testToken, letters).Handler()
	res, _ := do(t, h, replayForm("evt-1", "ana", "endpoint fixed", testToken))
	loc := res.Header.Get("Location")
	for _, forged := range []string{
		"/ui/dead-letters?replayed=FORGED&audit=999",
		"/ui/dead-letters?replayed=FORGED&audit=999&sig=00",
		strings.Replace(loc, "audit=7", "audit=8", 1),
		strings.Replace(loc, "replayed=evt-1", "replayed=evt-2", 1),
	} {
		if _, body := do(t, h, httptest.NewRequest(http.MethodGet, forged, nil)); strings.Contains(body, "Replayed <code>") {
			t.Errorf("%s shows a replay confirmation", forged)
		}
	}
	if _, body := do(t, h, httptest.NewRequest(http.MethodGet, loc, nil)); !strings.Contains(body, "Replayed <code>evt-1</code>") {
		t.Errorf("the replay's own confirmation is not shown (%s)", loc)
	}
}

func TestReplayOfAnUnknownIDIs404(t *testing.T) {
	h := testPage(t, testToken, &fakeLetters{}).Handler()
	if res, _ := do(t, h, replayForm("nope", "ana", "fixed", testToken)); res.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", res.StatusCode)
	}
}

func TestReplayFailureIs502WithTheReason(t *testing.T) {
	letters := &fakeLetters{letters: []DeadLetter{{ID: "evt-1"}}, err: errors.New("broker did not confirm")}
	res, body := do(t, testPage(t, testToken, letters).Handler(), replayForm("evt-1", "ana", "fixed", testToken))
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "broker did not confirm") {
		t.Fatalf("status %d body %s", res.StatusCode, body)
	}
}

func TestDeadLetterListingIsCachedBetweenLoads(t *testing.T) {
	letters := &fakeLetters{letters: []DeadLetter{{ID: "evt-1"}}}
	now := time.Unix(1_800_000_000, 0)
	p, err := New(Sources{Routes: fakeRoutes{}, Limiter: fakeLimiter{}, DeadLetters: letters},
		Options{ListCacheFor: 5 * time.Second, Clock: clock.Func(func() time.Time { return now })})
	if err != nil {
		t.Fatal(err)
	}
	h := p.Handler()
	for range 3 {
		do(t, h, httptest.NewRequest(http.MethodGet, "/ui/dead-letters", nil))
	}
	if letters.lists != 1 {
		t.Fatalf("3 loads within the cache listed the DLQ %d times, want 1", letters.lists)
	}
	now = now.Add(5 * time.Second)
	do(t, h, httptest.NewRequest(http.MethodGet, "/ui/dead-letters", nil))
	if letters.lists != 2 {
		t.Fatalf("a load after ListCacheFor listed %d times in all, want 2", letters.lists)
	}
}

func TestMountServesThePageAndPassesTheAdminPaths(t *testing.T) {
	admin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "admin "+r.URL.Path) })
	h := Mount(admin, testPage(t, "", &fakeLetters{}).Handler())
	if res, body := do(t, h, httptest.NewRequest(http.MethodGet, "/metrics", nil)); res.StatusCode != 200 || body != "admin /metrics" {
		t.Errorf("/metrics: %d %q", res.StatusCode, body)
	}
	if res, _ := do(t, h, httptest.NewRequest(http.MethodGet, "/", nil)); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui" {
		t.Errorf("/: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res, body := do(t, h, httptest.NewRequest(http.MethodGet, "/ui/style.css", nil)); res.StatusCode != 200 || !strings.Contains(body, "font") {
		t.Errorf("/ui/style.css: %d", res.StatusCode)
	}
	if res, _ := do(t, h, httptest.NewRequest(http.MethodGet, "/ui/nothing", nil)); res.StatusCode != http.StatusNotFound {
		t.Errorf("/ui/nothing: %d, want 404", res.StatusCode)
	}
	if res, _ := do(t, h, httptest.NewRequest(http.MethodPost, "/ui", nil)); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui: %d, want 405", res.StatusCode)
	}
}

// TestDeadLettersAFailedListingNeverRendersAsEmpty: during a broker alarm
// the page said "Listing failed …" and then "The dead-letter queue is
// empty." A failed read (with nothing, or part, read) says so and never
// claims an empty queue.
func TestDeadLettersAFailedListingNeverRendersAsEmpty(t *testing.T) {
	alarm := errors.New("the broker does not take publishes now")
	for _, tc := range []struct {
		name    string
		letters []DeadLetter
		err     error
		want    []string
		not     []string
	}{
		{"failed, none read", nil, alarm, []string{"Listing failed: the broker does not take publishes now", `id="letters-unknown"`}, []string{"is empty", `id="list-partial"`}},
		{"failed after one", []DeadLetter{{ID: "ev-1", Source: "whatsapp"}}, alarm, []string{"Listing failed", `id="list-partial"`, "ev-1"}, []string{"is empty", `id="letters-unknown"`}},
		{"empty", nil, nil, []string{"The dead-letter queue is empty."}, []string{"Listing failed", `id="letters-unknown"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPage(t, testToken, &fakeLetters{letters: tc.letters, listErr: tc.err})
			_, body := do(t, p.Handler(), httptest.NewRequest(http.MethodGet, "/ui/dead-letters", nil))
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("page has %q:\n%s", n, body)
				}
			}
		})
	}
}

// TestRoutesTableShowsTheLimitInForceDuringARelax: with api relaxed ×2
// the Routes table showed "50 / 1m00s per user", the base limit; it now
// shows 100, the factor and when the relax ends, and the base beside it.
func TestRoutesTableShowsTheLimitInForceDuringARelax(t *testing.T) {
	p := testPage(t, testToken, &fakeLetters{})
	_, body := do(t, p.Handler(), httptest.NewRequest(http.MethodGet, "/ui", nil))
	i := strings.Index(body, `id="routes"`)
	j := strings.Index(body, `id="limiter"`)
	if i < 0 || j < i {
		t.Fatalf("no routes section:\n%s", body)
	}
	routes := body[i:j]
	for _, want := range []string{"100 / 1m00s per user", "relaxed ×2 until", "(base 50,"} {
		if !strings.Contains(routes, want) {
			t.Errorf("Routes table lacks %q:\n%s", want, routes)
		}
	}
	if strings.Contains(routes, "50 / 1m00s per user") {
		t.Errorf("Routes table shows the base limit as the one in force:\n%s", routes)
	}
}
