package adminui

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

// fakeRelaxer relaxes what it is asked, or answers bad or err; off is its
// Unavailable.
type fakeRelaxer struct {
	mu   sync.Mutex
	got  []RelaxRequest
	off  string
	bad  *BadRelax
	err  error
	now  time.Time
	warn string
}

func (f *fakeRelaxer) Unavailable() string { return f.off }

func (f *fakeRelaxer) Relax(_ context.Context, req RelaxRequest) (RelaxResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, req)
	switch {
	case f.bad != nil:
		return RelaxResult{}, f.bad
	case f.err != nil:
		return RelaxResult{}, f.err
	}
	return RelaxResult{Rule: req.Rule, Factor: 3, Until: f.now.Add(30 * time.Minute), AuditID: 12, Warning: f.warn}, nil
}

func (f *fakeRelaxer) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

// relaxPage is an overview whose route portal has rule burst (50 / 5s per
// ip), with rx as its Relaxer.
func relaxPage(t *testing.T, token string, rx *fakeRelaxer) *Page {
	t.Helper()
	now := time.Date(2026, 3, 9, 14, 0, 0, 0, time.UTC)
	rx.now = now
	p, err := New(Sources{
		Routes: fakeRoutes{{Name: "portal", PathPrefix: "/", Upstream: "http://127.0.0.1:3000",
			Rules: []Rule{{Name: "burst", Scope: "ip", Algorithm: "fixed_window", Mode: "enforce", Limit: 50, Window: 5 * time.Second}}}},
		Limiter: fakeLimiter{Store: "redis", StoreState: "ok", Breaker: "closed", RelaxPoll: 5 * time.Second},
		Relaxer: rx,
	}, Options{Token: token, Clock: clock.Func(func() time.Time { return now })})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func relaxForm(values url.Values) *http.Request {
	form := url.Values{"rule": {"burst"}, "factor": {"3"}, "for": {"30m"}, "operator": {"ana.plantao"}, "reason": {"matrícula"}, "token": {testToken}}
	for k, v := range values {
		form[k] = v
	}
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9091/ui/relax", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://127.0.0.1:9091")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return req
}

// followed is the request target a browser sends for the redirect to
// loc: without its fragment.
func followed(loc string) string {
	target, _, _ := strings.Cut(loc, "#")
	return target
}

func routesSection(t *testing.T, body string) string {
	t.Helper()
	i, j := strings.Index(body, `id="routes"`), strings.Index(body, `id="limiter"`)
	if i < 0 || j < i {
		t.Fatalf("no routes section:\n%s", body)
	}
	return body[i:j]
}

// TestRelaxFormIsBesideItsRuleOnlyWhereItCanWork: each rule of the Routes
// table has its relax form (rule, factor, for, name, reason, token) when
// ADMIN_TOKEN is set and the source can relax; read-only and unavailable
// pages show no form and say why.
func TestRelaxFormIsBesideItsRuleOnlyWhereItCanWork(t *testing.T) {
	_, body := do(t, relaxPage(t, testToken, &fakeRelaxer{}).Handler(), httptest.NewRequest(http.MethodGet, "/ui", nil))
	routes := routesSection(t, body)
	for _, want := range []string{`<details class="relax" id="relax-portal-burst">`, `action="/ui/relax"`, `name="rule" value="burst"`,
		`name="factor" required`, `name="for" required`, `name="operator" required`, `name="reason" required`, `type="password" name="token" required`} {
		if !strings.Contains(routes, want) {
			t.Errorf("Routes table lacks %q", want)
		}
	}
	for name, tc := range map[string]struct {
		token string
		rx    *fakeRelaxer
		want  string
	}{
		"read-only":   {"", &fakeRelaxer{}, "Read-only: set <code>ADMIN_TOKEN</code>"},
		"unavailable": {testToken, &fakeRelaxer{off: "no database for the audit"}, "Relaxing from this page is unavailable: no database for the audit."},
	} {
		_, body := do(t, relaxPage(t, tc.token, tc.rx).Handler(), httptest.NewRequest(http.MethodGet, "/ui", nil))
		routes := routesSection(t, body)
		if strings.Contains(routes, "<form") || !strings.Contains(routes, tc.want) {
			t.Errorf("%s: Routes table has a form or lacks %q:\n%s", name, tc.want, routes)
		}
	}
}

// TestRelaxRedirectsToTheOverviewShowingTheLimitInForce: the form answers
// 303 to the overview, which says the limit in force (150 = 50 × 3), the
// factor, when it ends and the audit row.
func TestRelaxRedirectsToTheOverviewShowingTheLimitInForce(t *testing.T) {
	rx := &fakeRelaxer{}
	h := relaxPage(t, testToken, rx).Handler()
	res, _ := do(t, h, relaxForm(url.Values{"operator": {"  ana.plantao "}}))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303", res.StatusCode)
	}
	if len(rx.got) != 1 || rx.got[0] != (RelaxRequest{Rule: "burst", Factor: "3", For: "30m", Operator: "  ana.plantao ", Reason: "matrícula"}) {
		t.Fatalf("relaxer got %+v", rx.got)
	}
	loc := res.Header.Get("Location")
	if !strings.HasPrefix(loc, "/ui?") || !strings.HasSuffix(loc, "#routes") {
		t.Fatalf("Location %q", loc)
	}
	_, body := do(t, h, httptest.NewRequest(http.MethodGet, followed(loc), nil))
	want := "Relaxed <strong>burst</strong>: <strong>150 / 5s per ip</strong> in force (×3 of 50) until 2026-03-09 14:30:00Z (30m00s left). " +
		"Recorded in limit_relaxes as #12; every gateway applies it within 5s."
	if !strings.Contains(body, want) {
		t.Errorf("overview after the relax lacks\n%s\n%s", want, routesSection(t, body))
	}
}

// TestAForgedRelaxConfirmationIsNotShown: only the 303's own signed
// query shows a relax; any part changed shows nothing.
func TestAForgedRelaxConfirmationIsNotShown(t *testing.T) {
	h := relaxPage(t, testToken, &fakeRelaxer{}).Handler()
	res, _ := do(t, h, relaxForm(nil))
	loc := followed(res.Header.Get("Location"))
	for _, forged := range []string{
		"/ui?relaxed=burst&factor=3&until=1773066600&audit=12",
		strings.Replace(loc, "factor=3", "factor=30", 1),
		strings.Replace(loc, "audit=12", "audit=13", 1),
		strings.Replace(loc, "relaxed=burst", "relaxed=api", 1),
		strings.Replace(loc, "until=", "until=1", 1),
	} {
		if _, body := do(t, h, httptest.NewRequest(http.MethodGet, forged, nil)); strings.Contains(body, `id="relaxed"`) {
			t.Errorf("%s shows a relax confirmation", forged)
		}
	}
	if _, body := do(t, h, httptest.NewRequest(http.MethodGet, loc, nil)); !strings.Contains(body, `id="relaxed"`) {
		t.Errorf("the relax's own confirmation is not shown (%s)", loc)
	}
}

// TestRelaxRefusalsAreNeverShownAsSuccess: each way a relax is refused
// (no token, a wrong one, a cross-site form, read-only, bad input, the
// store or audit down, unavailable) is its status with the reason on a
// problem page, never a redirect to the overview nor the word
// "Relaxed"; the source is called only for an authorized same-origin form.
func TestRelaxRefusalsAreNeverShownAsSuccess(t *testing.T) {
	bad := &BadRelax{Problems: []FieldProblem{{"factor", "must be between 1 and 100 (a relax raises limits; it never turns a rule off)"},
		{"for", `"soon" is not a duration`}}}
	for _, tc := range []struct {
		name   string
		token  string
		rx     *fakeRelaxer
		form   url.Values
		mutate func(*http.Request)
		status int
		want   []string
		called bool
	}{
		{name: "no token", token: testToken, rx: &fakeRelaxer{}, form: url.Values{"token": {""}}, status: 403, want: []string{"operator token is not ADMIN_TOKEN"}},
		{name: "wrong token", token: testToken, rx: &fakeRelaxer{}, form: url.Values{"token": {testToken[:31]}}, status: 403, want: []string{"operator token is not ADMIN_TOKEN"}},
		{name: "foreign origin", token: testToken, rx: &fakeRelaxer{}, mutate: func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, status: 403, want: []string{"not sent from this page"}},
		{name: "null origin", token: testToken, rx: &fakeRelaxer{}, mutate: func(r *http.Request) { r.Header.Set("Origin", "null") }, status: 403, want: []string{"not sent from this page"}},
		{name: "cross-site fetch", token: testToken, rx: &fakeRelaxer{}, mutate: func(r *http.Request) { r.Header.Del("Origin"); r.Header.Set("Sec-Fetch-Site", "cross-site") }, status: 403, want: []string{"not sent from this page"}},
		{name: "read-only", token: "", rx: &fakeRelaxer{}, status: 403, want: []string{"read-only"}},
		{name: "unavailable", token: testToken, rx: &fakeRelaxer{off: "relaxes need a shared store"}, status: 503, want: []string{"unavailable on this gateway: relaxes need a shared store"}},
		{name: "bad input", token: testToken, rx: &fakeRelaxer{bad: bad}, status: 400, called: true,
			want: []string{"The relax was refused; nothing changed:", "<li>Factor: must be between 1 and 100", "<li>For: &#34;soon&#34; is not a duration"}},
		{name: "store down", token: testToken, rx: &fakeRelaxer{err: errors.New("the rate-limit store did not take it: dial tcp 127.0.0.1:6379: connection refused")}, status: 503, called: true,
			want: []string{"The relax was not applied, so no relax is in force: the rate-limit store did not take it: dial tcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := relaxPage(t, tc.token, tc.rx).Handler()
			req := relaxForm(tc.form)
			if tc.mutate != nil {
				tc.mutate(req)
			}
			res, body := do(t, h, req)
			if res.StatusCode != tc.status || res.Header.Get("Location") != "" {
				t.Errorf("status %d Location %q, want %d", res.StatusCode, res.Header.Get("Location"), tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q:\n%s", w, body)
				}
			}
			if strings.Contains(body, "Relaxed") || !strings.Contains(body, `href="/ui#routes"`) {
				t.Errorf("a refusal reads as success or has no way back:\n%s", body)
			}
			if called := tc.rx.calls() > 0; called != tc.called {
				t.Errorf("relaxer called = %v, want %v", called, tc.called)
			}
		})
	}
}

// TestRelaxInForceButUnrecordedSaysSo: the store took the relax but its
// audit row stayed pending: the overview shows the relax and the warning.
func TestRelaxInForceButUnrecordedSaysSo(t *testing.T) {
	h := relaxPage(t, testToken, &fakeRelaxer{warn: "the audit row #12 stays pending"}).Handler()
	res, _ := do(t, h, relaxForm(nil))
	_, body := do(t, h, httptest.NewRequest(http.MethodGet, followed(res.Header.Get("Location")), nil))
	if !strings.Contains(body, `id="relaxed"`) || !strings.Contains(body, `<p class="flash bad" id="relaxed-warning">the audit row #12 stays pending</p>`) {
		t.Errorf("overview:\n%s", routesSection(t, body))
	}
}
