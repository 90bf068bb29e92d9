package adminui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

//go:embed templates/*.html static/style.css
var files embed.FS

// ErrNotFound is returned by DeadLetterSource.Replay when no dead letter
// has the id asked for.
var ErrNotFound = errors.New("adminui: no dead letter with that id")

// Defaults of Options.
const (
	DefaultListLimit    = 50
	DefaultListCacheFor = 5 * time.Second
	DefaultTimeout      = 5 * time.Second
)

// Options configure a Page.
type Options struct {
	// Token is ADMIN_TOKEN: replaying and relaxing need it typed into the
	// form (compared in constant time). Empty: the page is read-only,
	// shows no form and refuses every POST with 403.
	Token string
	// Environment is shown in the header (production, staging, …).
	Environment string
	// ListLimit bounds the dead letters one listing reads (0:
	// DefaultListLimit); ListCacheFor is how long a listing is served
	// again before the DLQ is read anew (0: DefaultListCacheFor), so a
	// busy page never reads a busy DLQ on every load.
	ListLimit    int
	ListCacheFor time.Duration
	// Timeout bounds each source call of one page (0: DefaultTimeout).
	Timeout time.Duration
	// Clock is the clock (nil: the wall clock); Logger logs replays and source
	// errors (nil: discard).
	Clock  clock.Clock
	Logger *slog.Logger
}

// Page is the operator page. Build it with New; serve Handler.
type Page struct {
	src   Sources
	opts  Options
	gate  tokenGate
	pages map[string]*template.Template
	css   []byte
	log   *slog.Logger

	// confirmKey signs the confirmation the 303 after a replay or a relax
	// carries in its query (sign), so a crafted link cannot make the page
	// claim a replay or a relax that did not happen. Random per process: a
	// confirmation does not outlive a restart.
	confirmKey [32]byte

	mu      sync.Mutex // one DLQ listing at a time
	listed  time.Time
	letters []DeadLetter
	listErr error
}

// New builds the page. Routes and Limiter are required.
func New(src Sources, opts Options) (*Page, error) {
	if src.Routes == nil || src.Limiter == nil {
		return nil, errors.New("adminui: the Routes and Limiter sources are required")
	}
	if opts.ListLimit <= 0 {
		opts.ListLimit = DefaultListLimit
	}
	if opts.ListCacheFor <= 0 {
		opts.ListCacheFor = DefaultListCacheFor
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Page{src: src, opts: opts, gate: newTokenGate(opts.Token), pages: map[string]*template.Template{}, log: opts.Logger.With("component", "adminui")}
	if _, err := rand.Read(p.confirmKey[:]); err != nil {
		return nil, fmt.Errorf("adminui: drawing the confirmation key: %w", err)
	}
	css, err := files.ReadFile("static/style.css")
	if err != nil {
		return nil, err
	}
	p.css = css
	for _, name := range []string{"overview", "deadletters", "problem"} {
		patterns := []string{"templates/base.html", "templates/" + name + ".html"}
		if name == "overview" {
			patterns = append(patterns, "templates/rollout.html") // its own section (rollout.go)
		}
		t, err := template.New("base.html").Funcs(p.funcs()).ParseFS(files, patterns...)
		if err != nil {
			return nil, err
		}
		p.pages[name] = t
	}
	return p, nil
}

// Handler serves the paths of the package doc; any other path under
// /ui is 404 and every other method 405. A request addressed by a DNS
// name other than localhost is 421 (DNS rebinding; see hostGuard).
func (p *Page) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", p.overview)
	mux.HandleFunc("GET /ui/{$}", p.overview)
	mux.HandleFunc("GET /ui/dead-letters", p.deadLetters)
	mux.HandleFunc("POST /ui/dead-letters/replay", p.replay)
	mux.HandleFunc("POST /ui/relax", p.relax)
	mux.HandleFunc("GET /ui/style.css", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(p.css)
	})
	return p.hostGuard(mux)
}

// Mount serves the page's paths (/ui, /ui/…) with page, redirects "/" to
// /ui, and passes every other request to admin (the admin listener's
// /metrics, /healthz, /readyz, /debug/pprof/).
func Mount(admin, page http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/":
			http.Redirect(w, r, "/ui", http.StatusSeeOther)
		case p == "/ui" || strings.HasPrefix(p, "/ui/"):
			page.ServeHTTP(w, r)
		default:
			admin.ServeHTTP(w, r)
		}
	})
}

// view is what every template gets.
type view struct {
	Title       string
	Nav         string
	Environment string
	ReadOnly    bool
	Now         time.Time
	Data        any
}

func (p *Page) render(w http.ResponseWriter, status int, name string, v view) {
	v.Environment, v.ReadOnly, v.Now = p.opts.Environment, !p.gate.set, p.opts.Clock.Now()
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with the replay form, which sameOrigin refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	// No script at all; styles and forms only from this page.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	var b strings.Builder
	if err := p.pages[name].Execute(&b, v); err != nil {
		p.log.Error("rendering the operator page", "page", name, "err", err)
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// backLink is where a problem page leads back to.
type backLink struct{ Href, Label string }

var (
	deadLettersBack = backLink{"/ui/dead-letters", "Back to the dead letters"}
	overviewBack    = backLink{"/ui#routes", "Back to the overview"}
)

func (p *Page) problem(w http.ResponseWriter, status int, msg string) {
	p.problemBack(w, status, msg, nil, deadLettersBack)
}

// problemBack renders a refusal: its status, msg, the details (one line
// each) and a link back.
func (p *Page) problemBack(w http.ResponseWriter, status int, msg string, details []string, back backLink) {
	p.render(w, status, "problem", view{Title: http.StatusText(status), Data: struct {
		Status  int
		Message string
		Details []string
		Back    backLink
	}{status, msg, details, back}})
}

type overviewData struct {
	Routes   []Route
	Limiter  LimiterState
	Pipeline *PipelineState
	Rollout  *RolloutState
	// CanRelax: the Routes table offers each rule's relax form; RelaxOff
	// says why not when the page could otherwise (the token is set).
	CanRelax bool
	RelaxOff string
	Relaxed  *relaxedFlash
}

func (p *Page) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), p.opts.Timeout)
	defer cancel()
	d := overviewData{Routes: p.src.Routes.Routes(), Limiter: p.src.Limiter.Limiter(ctx)}
	d.Routes = withRelaxes(d.Routes, d.Limiter.Relaxes, p.opts.Clock.Now())
	if p.src.Relaxer != nil && p.gate.set {
		d.RelaxOff = p.src.Relaxer.Unavailable()
		d.CanRelax = d.RelaxOff == ""
	}
	d.Relaxed = p.relaxed(r.URL.Query(), d.Routes, p.opts.Clock.Now())
	if p.src.Pipeline != nil {
		ps := p.src.Pipeline.Pipeline(ctx)
		d.Pipeline = &ps
	}
	if p.src.Rollout != nil {
		rs := p.src.Rollout.Rollout(ctx)
		d.Rollout = &rs
	}
	p.render(w, http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Data: d})
}

// withRelaxes returns routes with each rule under a relax in force at now
// carrying the limit in force (floor(limit × factor), as ratelimit applies
// it) and the relax, so the Routes table never shows the base limit as if
// it were the one enforced.
func withRelaxes(routes []Route, relaxes []Relax, now time.Time) []Route {
	if len(relaxes) == 0 {
		return routes
	}
	by := map[string]Relax{}
	for _, r := range relaxes {
		if now.Before(r.Until) {
			by[r.Rule] = r
		}
	}
	out := make([]Route, len(routes))
	for i, rt := range routes {
		rt.Rules = append([]Rule(nil), rt.Rules...)
		for j, ru := range rt.Rules {
			if rx, ok := by[ru.Name]; ok && rx.Factor >= 1 {
				rx := rx
				ru.Relax = &rx
				ru.InForce = inForce(ru.Limit, rx.Factor)
				rt.Rules[j] = ru
			}
		}
		out[i] = rt
	}
	return out
}

type deadLettersData struct {
	Configured bool
	Letters    []DeadLetter
	Err        string
	Limit      int
	ListedAt   time.Time
	CacheFor   time.Duration
	Replayed   string
	AuditID    string
}

// list returns the cached listing, reading the DLQ again when it is older
// than ListCacheFor; concurrent loads wait for the one listing.
func (p *Page) list(ctx context.Context) ([]DeadLetter, time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.opts.Clock.Now()
	if p.listed.IsZero() || now.Sub(p.listed) >= p.opts.ListCacheFor {
		p.letters, p.listErr = p.src.DeadLetters.List(ctx, p.opts.ListLimit)
		p.listed = p.opts.Clock.Now()
		if p.listErr != nil {
			p.log.Warn("listing dead letters", "err", p.listErr)
		}
	}
	return p.letters, p.listed, p.listErr
}

func (p *Page) forget() {
	p.mu.Lock()
	p.listed = time.Time{}
	p.mu.Unlock()
}

func (p *Page) deadLetters(w http.ResponseWriter, r *http.Request) {
	d := deadLettersData{Configured: p.src.DeadLetters != nil, Limit: p.opts.ListLimit, CacheFor: p.opts.ListCacheFor}
	if d.Configured {
		// The one listing is shared (cached for ListCacheFor): a client
		// that goes away must not cut it short for everyone after it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.opts.Timeout)
		defer cancel()
		letters, at, err := p.list(ctx)
		d.Letters, d.ListedAt = letters, at
		if err != nil {
			d.Err = err.Error()
		}
	}
	q := r.URL.Query()
	if id, audit := q.Get("replayed"), q.Get("audit"); id != "" && p.signed(q.Get("sig"), "replay", id, audit) {
		d.Replayed, d.AuditID = id, audit
	}
	p.render(w, http.StatusOK, "deadletters", view{Title: "Dead letters", Nav: "deadletters", Data: d})
}

// maxFormBytes bounds a replay form.
const maxFormBytes = 16 << 10

func (p *Page) replay(w http.ResponseWriter, r *http.Request) {
	switch {
	case !p.gate.set:
		p.problem(w, http.StatusForbidden, "This page is read-only: ADMIN_TOKEN is not set on this gateway.")
		return
	case !sameOrigin(r):
		p.log.Warn("replay refused: not sent from this page", "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		p.problem(w, http.StatusForbidden, "Refused: the form was not sent from this page (Origin / Sec-Fetch-Site).")
		return
	case p.src.DeadLetters == nil:
		p.problem(w, http.StatusNotFound, "The webhook pipeline is not configured on this gateway.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		p.problem(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	if !p.gate.valid(r.PostForm.Get("token")) {
		p.log.Warn("replay refused: wrong operator token", "peer", r.RemoteAddr)
		p.problem(w, http.StatusForbidden, "Refused: the operator token is not ADMIN_TOKEN.")
		return
	}
	req := ReplayRequest{
		ID:       r.PostForm.Get("id"),
		Operator: strings.TrimSpace(r.PostForm.Get("operator")),
		Reason:   strings.TrimSpace(r.PostForm.Get("reason")),
	}
	if req.ID == "" || req.Operator == "" || req.Reason == "" {
		p.problem(w, http.StatusBadRequest, "A replay needs the event id, your name and a reason.")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*p.opts.Timeout)
	defer cancel()
	res, err := p.src.DeadLetters.Replay(ctx, req)
	p.forget()
	switch {
	case errors.Is(err, ErrNotFound):
		p.problem(w, http.StatusNotFound, "No dead letter has the id "+strconv.Quote(req.ID)+" (it may have been replayed already).")
		return
	case err != nil:
		p.log.Error("replaying a dead letter", "event_id", req.ID, "operator", req.Operator, "err", err)
		p.problem(w, http.StatusBadGateway, "The replay failed: "+err.Error())
		return
	}
	p.log.Info("dead letter replayed from the operator page", "event_id", req.ID, "operator", req.Operator, "reason", req.Reason, "audit_id", res.AuditID)
	audit := strconv.FormatInt(res.AuditID, 10)
	http.Redirect(w, r, "/ui/dead-letters?replayed="+url.QueryEscape(req.ID)+"&audit="+audit+"&sig="+p.sign("replay", req.ID, audit), http.StatusSeeOther)
}

// sign is the signature of a confirmation the page redirects with (a
// replay's, a relax's): hex HMAC-SHA256 of parts, NUL-separated, under
// the process's confirmKey. The first part names the action.
func (p *Page) sign(parts ...string) string {
	m := hmac.New(sha256.New, p.confirmKey[:])
	for i, part := range parts {
		if i > 0 {
			m.Write([]byte{0})
		}
		m.Write([]byte(part))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// signed reports whether sig is this process's signature of parts.
func (p *Page) signed(sig string, parts ...string) bool {
	return hmac.Equal([]byte(sig), []byte(p.sign(parts...)))
}
