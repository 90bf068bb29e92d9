package queueguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
	"github.com/olp-edu/borda/webhook/publish"
)

// fakeAPI serves GET /api/queues/v%2F1/{name} with the JSON set per queue.
type fakeAPI struct {
	mu      sync.Mutex
	answers map[string]string
	auth    string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	user, pass, _ := r.BasicAuth()
	f.auth = user + ":" + pass
	name, ok := strings.CutPrefix(r.URL.EscapedPath(), "/prefix/api/queues/v%2F1/")
	body, found := f.answers[name]
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write([]byte(body))
}

func (f *fakeAPI) set(name, body string) {
	f.mu.Lock()
	f.answers[name] = body
	f.mu.Unlock()
}

func answer(name, typ, args, def string, messages int) string {
	return fmt.Sprintf(`{"name":%q,"vhost":"v/1","type":%q,"arguments":%s,"policy":"p","operator_policy":null,"effective_policy_definition":%s,"messages":%d,"message_bytes":%d}`,
		name, typ, args, def, messages, messages*10)
}

func newTestGuard(t *testing.T, api *fakeAPI) *Guard {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	g, err := New(Options{
		ManagementURL: strings.Replace(srv.URL, "http://", "http://mon:s3cret@", 1) + "/prefix/",
		Vhost:         "v/1",
		Queues: []Queue{
			{Name: "fwd", Routes: []Route{{Exchange: "ex", Binding: "a.b.legacy"}}},
			{Name: "events", Routes: []Route{{Exchange: "ex", Binding: "a.b.#"}}},
			{Name: "dlq", Routes: []Route{{Exchange: "dlx", Binding: "dlq"}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGuardRefusesBeforeTheLimitOfAnUnguardedQueue: a quorum forward
// queue under a drop-head policy with max-length 100 holding 80: the
// guard admits publishes until depth + published reaches 100 - 10, then
// refuses with ErrQueueMayDrop; publishes that reach only guarded
// queues pass; a read resets the count to the new depth.
func TestGuardRefusesBeforeTheLimitOfAnUnguardedQueue(t *testing.T) {
	guarded := `{"x-queue-type":"quorum","x-overflow":"reject-publish"}`
	api := &fakeAPI{answers: map[string]string{
		"fwd":    answer("fwd", "quorum", guarded, `{"max-length":100,"overflow":"drop-head"}`, 80),
		"events": answer("events", "quorum", guarded, `{}`, 5),
		"dlq":    answer("dlq", "quorum", guarded, `{"max-length":100}`, 0),
	}}
	g := newTestGuard(t, api)
	g.Check(context.Background())
	if api.auth != "mon:s3cret" {
		t.Errorf("basic credentials %q, want the URL's userinfo", api.auth)
	}
	if got := g.Unguarded(); len(got) != 1 || got[0] != "fwd" {
		t.Fatalf("Unguarded = %v, want [fwd]", got)
	}
	admitted := 0
	var err error
	for range 20 {
		if err = g.Admit("ex", "a.b.legacy", 10); err != nil {
			break
		}
		admitted++
	}
	if admitted != 10 || !errors.Is(err, publish.ErrQueueMayDrop) {
		t.Fatalf("admitted %d then %v; want 10 (80 + 10 = 100 - headroom 10) then ErrQueueMayDrop", admitted, err)
	}
	if err := g.Admit("ex", "a.b.other", 10); err != nil {
		t.Errorf("a publish reaching only the guarded events queue: %v", err)
	}
	if err := g.Admit("dlx", "dlq", 10); err != nil {
		t.Errorf("a dead letter to the guarded DLQ: %v", err)
	}
	// The consumer took some: the next read admits again, but the
	// publishes of the last interval still count (the depth may be a
	// statistics sample older than the read): 75 + 10 leaves 5.
	api.set("fwd", answer("fwd", "quorum", guarded, `{"max-length":100,"overflow":"drop-head"}`, 75))
	g.Check(context.Background())
	if n := admitAll(g); n != 5 {
		t.Errorf("75 read, 10 published in the interval before: admitted %d, want 5", n)
	}
	g.Check(context.Background())
	if n := admitAll(g); n != 10 {
		t.Errorf("75 read, 5 published in the interval before: admitted %d, want 10", n)
	}
	// The policy is fixed: everything is admitted.
	api.set("fwd", answer("fwd", "quorum", guarded, `{"max-length":100}`, 100))
	g.Check(context.Background())
	if got := g.Unguarded(); len(got) != 0 {
		t.Errorf("Unguarded = %v after the policy lost its overflow", got)
	}
	if err := g.Admit("ex", "a.b.legacy", 10); err != nil {
		t.Errorf("Admit on a guarded full queue = %v (the broker nacks: 503 NACK)", err)
	}
}

// TestGuardKeepsTheLastSettingsWhenTheAPIFails: a failed read keeps the
// last settings and the counts grow; errors never carry the password.
func TestGuardKeepsTheLastSettingsWhenTheAPIFails(t *testing.T) {
	api := &fakeAPI{answers: map[string]string{
		"fwd":    answer("fwd", "quorum", `{"x-overflow":"reject-publish"}`, `{"max-length":20,"overflow":"drop-head"}`, 0),
		"events": answer("events", "quorum", `{"x-overflow":"reject-publish"}`, `{}`, 0),
		"dlq":    answer("dlq", "quorum", `{"x-overflow":"reject-publish"}`, `{}`, 0),
	}}
	g := newTestGuard(t, api)
	g.Check(context.Background())
	if err := g.Admit("ex", "a.b.legacy", 1); err != nil {
		t.Fatalf("Admit = %v", err)
	}
	api.set("fwd", "not json")
	g.Check(context.Background())
	if got := g.Unguarded(); len(got) != 1 {
		t.Fatalf("Unguarded = %v, want the last settings kept", got)
	}
	// max-length 20, headroom 10: 10 admitted in all.
	n := 1
	for g.Admit("ex", "a.b.legacy", 1) == nil && n < 50 {
		n++
	}
	if n != 10 {
		t.Errorf("admitted %d, want 10", n)
	}
	if _, err := g.get(context.Background(), "missing"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("get of a missing queue = %v, want an error without the password", err)
	}
}

// TestGuardUnknownDepthRefuses: an unguarded queue whose depth the API
// does not report yet counts as at its limit.
func TestGuardUnknownDepthRefuses(t *testing.T) {
	api := &fakeAPI{answers: map[string]string{
		"fwd": `{"name":"fwd","type":"quorum","arguments":{"x-overflow":"reject-publish"},"effective_policy_definition":{"max-length":1000,"overflow":"drop-head"}}`,
	}}
	g := newTestGuard(t, api)
	if next := g.Check(context.Background()); next != unknownEvery {
		t.Errorf("next read in %s, want %s while the depth is unknown", next, unknownEvery)
	}
	if err := g.Admit("ex", "a.b.legacy", 1); !errors.Is(err, publish.ErrQueueMayDrop) {
		t.Errorf("Admit = %v, want ErrQueueMayDrop", err)
	}
}

// admitAll admits publishes to the forward queue until the guard refuses
// one (at most 100) and returns how many it admitted.
func admitAll(g *Guard) int {
	n := 0
	for n < 100 && g.Admit("ex", "a.b.legacy", 10) == nil {
		n++
	}
	return n
}

// TestGuardRefusesEveryPublishToAQueueItNeverRead is fresh attack pass 9's
// W01: with a management API the guard could never read (wrong
// credentials: 401; a wrong vhost or a deleted queue: 404; the API down;
// an answer that is not the API's), it admitted every publish, and a
// drop-head policy dropped 5 of 8 acknowledged events while /readyz said
// ready. Now a queue whose settings were never read refuses every publish
// that reaches it (ErrQueueMayDrop, naming the failure), the publisher is
// not ready (Unread), and the first good read admits again.
func TestGuardRefusesEveryPublishToAQueueItNeverRead(t *testing.T) {
	guarded := `{"x-queue-type":"quorum","x-overflow":"reject-publish"}`
	good := map[string]string{
		"fwd":    answer("fwd", "quorum", guarded, `{}`, 0),
		"events": answer("events", "quorum", guarded, `{}`, 0),
		"dlq":    answer("dlq", "quorum", guarded, `{}`, 0),
	}
	for _, tc := range []struct {
		name string
		api  http.HandlerFunc
		want string
	}{
		{"401", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "Not_Authorized", http.StatusUnauthorized) }, "HTTP 401"},
		{"404", http.NotFound, "does not know the queue"},
		{"500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }, "HTTP 500"},
		{"not the API", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>login</html>")) }, "invalid character"},
		{"down", nil, "connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var healthy atomic.Bool
			api := &fakeAPI{answers: good}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if healthy.Load() || tc.api == nil {
					api.ServeHTTP(w, r)
					return
				}
				tc.api(w, r)
			}))
			t.Cleanup(srv.Close)
			u := srv.URL
			if tc.api == nil { // a port nothing listens on
				down := httptest.NewServer(http.NotFoundHandler())
				u = down.URL
				down.Close()
			}
			g, err := New(Options{ManagementURL: u + "/prefix/", Vhost: "v/1", Queues: []Queue{
				{Name: "fwd", Routes: []Route{{Exchange: "ex", Binding: "a.b.legacy"}}},
				{Name: "events", Routes: []Route{{Exchange: "ex", Binding: "a.b.#"}}},
				{Name: "dlq", Routes: []Route{{Exchange: "dlx", Binding: "dlq"}}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			// Before any read, and after each failed one.
			for round := range 3 {
				if round > 0 {
					g.Check(context.Background())
				}
				err := g.Admit("ex", "a.b.legacy", 10)
				if !errors.Is(err, publish.ErrQueueMayDrop) {
					t.Fatalf("round %d: Admit = %v, want ErrQueueMayDrop", round, err)
				}
				if round > 0 && !strings.Contains(err.Error(), tc.want) {
					t.Errorf("round %d: Admit = %v, want it to name %q", round, err, tc.want)
				}
				if got := g.Unread(); len(got) != 3 {
					t.Errorf("round %d: Unread = %v, want the three queues", round, got)
				}
			}
			if tc.api == nil {
				return
			}
			healthy.Store(true)
			g.Check(context.Background())
			if err := g.Admit("ex", "a.b.legacy", 10); err != nil {
				t.Errorf("after a good read: Admit = %v", err)
			}
			if got := g.Unread(); len(got) != 0 {
				t.Errorf("after a good read: Unread = %v", got)
			}
		})
	}
}

// TestGuardNamesSettingsItCannotReadAgain is fresh attack pass 10's A39: a
// management API that fails after one good read (a rotated password) left
// the guard deciding on the old settings with /readyz ready and no metric.
// The settings stay (an API restart must not refuse every webhook), and
// once they are three intervals old Stale names the queue with its age
// and the failure; the first good read clears it.
func TestGuardNamesSettingsItCannotReadAgain(t *testing.T) {
	guarded := `{"x-queue-type":"quorum","x-overflow":"reject-publish"}`
	var failing atomic.Bool
	api := &fakeAPI{answers: map[string]string{
		"fwd":    answer("fwd", "quorum", guarded, `{}`, 0),
		"events": answer("events", "quorum", guarded, `{}`, 0),
		"dlq":    answer("dlq", "quorum", guarded, `{}`, 0),
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "Not_Authorized", http.StatusUnauthorized)
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	clk := clock.NewManual(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	g, err := New(Options{ManagementURL: srv.URL + "/prefix/", Vhost: "v/1", Every: time.Second, Clock: clk, Queues: []Queue{
		{Name: "fwd", Routes: []Route{{Exchange: "ex", Binding: "a.b.legacy"}}},
		{Name: "events", Routes: []Route{{Exchange: "ex", Binding: "a.b.#"}}},
		{Name: "dlq", Routes: []Route{{Exchange: "dlx", Binding: "dlq"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	g.Check(context.Background())
	clk.Advance(3 * time.Second)
	if got := g.Stale(); len(got) != 0 {
		t.Fatalf("Stale = %v three intervals after a good read, want none until more than three", got)
	}
	failing.Store(true)
	g.Check(context.Background())
	clk.Advance(time.Millisecond)
	got := g.Stale()
	if len(got) != 3 {
		t.Fatalf("Stale = %v after failed reads past three intervals, want the three queues", got)
	}
	for _, s := range got {
		if !strings.Contains(s, "HTTP 401") || !strings.Contains(s, "read 3s ago") {
			t.Errorf("Stale entry %q, want its age and the failure named", s)
		}
	}
	if err := g.Admit("ex", "a.b.legacy", 10); err != nil {
		t.Errorf("Admit on old guarded settings = %v, want admitted", err)
	}
	failing.Store(false)
	g.Check(context.Background())
	if got := g.Stale(); len(got) != 0 {
		t.Errorf("Stale = %v after a good read", got)
	}
}

// TestGuardNamesAManagementAPIThatRedirects: a management URL that
// redirects (a proxy in front of the API, a moved host) is not followed;
// the error names where it pointed, never the credentials or the
// Location's query, and the target is never called.
func TestGuardNamesAManagementAPIThatRedirects(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer target.Close()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/api?token=CANARY", http.StatusMovedPermanently)
	})
	srv := httptest.NewServer(api)
	defer srv.Close()
	g, err := New(Options{ManagementURL: strings.Replace(srv.URL, "http://", "http://mon:s3cret@", 1) + "/",
		Vhost: "v", Queues: []Queue{{Name: "fwd", Routes: []Route{{Exchange: "ex", Binding: "k"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.get(context.Background(), "fwd")
	host := strings.TrimPrefix(target.URL, "http://")
	if err == nil || !strings.Contains(err.Error(), "a redirect to "+host) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "CANARY") {
		t.Fatalf("get = %v; want the redirect's host, without the password or the query", err)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect's target was called %d times", n)
	}
}
