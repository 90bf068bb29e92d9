package denylist

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// A feed is never emptied by a failure: every kind of failed fetch keeps
// the last good list in force and says why.
func TestFeedKeepsTheLastGoodListOnEveryFailure(t *testing.T) {
	var answer atomic.Value
	answer.Store("203.0.113.0/24\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch a := answer.Load().(string); a {
		case "500":
			w.WriteHeader(500)
		case "hang-up":
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close()
		default:
			_, _ = io.WriteString(w, a)
		}
	}))
	defer srv.Close()
	f := NewFeed(FeedOptions{URL: srv.URL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	denied := netip.MustParseAddr("203.0.113.9")
	if f.List().DeniesAddr(denied) {
		t.Fatal("a feed that never fetched denies something")
	}
	if err := f.Refresh(context.Background()); err != nil || !f.List().DeniesAddr(denied) {
		t.Fatalf("first fetch: %v, denies %v", err, f.List().DeniesAddr(denied))
	}
	for _, bad := range []string{"500", "hang-up", "", "not-an-ip\n", "203.0.113.0/24\n0.0.0.0/0\n::/0\n", strings.Repeat("1.2.3.4\n", MaxFeedBytes/8+1)} {
		answer.Store(bad)
		err := f.Refresh(context.Background())
		_, _, last := f.Status()
		if err == nil || last == "" {
			t.Errorf("answer %.20q: Refresh = %v, status error %q; want a failure", bad, err, last)
		}
		if !f.List().DeniesAddr(denied) {
			t.Fatalf("answer %.20q emptied the feed", bad)
		}
	}
	answer.Store("198.51.100.7\n")
	if err := f.Refresh(context.Background()); err != nil || f.List().DeniesAddr(denied) || !f.List().DeniesAddr(netip.MustParseAddr("198.51.100.7")) {
		t.Fatalf("a good fetch after failures did not replace the list: %v", err)
	}
	if n, okAt, last := f.Status(); n != 1 || okAt.IsZero() || last != "" {
		t.Errorf("Status = %d %v %q", n, okAt, last)
	}
}

// TestFeedFollowsNoRedirect: a feed that answers a redirect (any 3xx)
// fails the fetch with the host it pointed to, keeps the last list, and
// its target is never fetched: a redirecting feed sent every replica to
// an internal address at each refresh (Go's default client follows ten).
func TestFeedFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, "198.51.100.7\n")
	}))
	defer target.Close()
	var code atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := int(code.Load()); c != 0 {
			http.Redirect(w, r, target.URL+"/list?sig=s3cr3t", c)
			return
		}
		_, _ = io.WriteString(w, "203.0.113.0/24\n")
	}))
	defer srv.Close()
	f := NewFeed(FeedOptions{URL: srv.URL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	denied := netip.MustParseAddr("203.0.113.9")
	for _, c := range []int32{301, 302, 303, 307, 308} {
		code.Store(c)
		err := f.Refresh(context.Background())
		host := strings.TrimPrefix(target.URL, "http://")
		if err == nil || !strings.Contains(err.Error(), "redirect") || !strings.Contains(err.Error(), host) || strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("a %d: Refresh = %v; want a failure naming the redirect's host %s and not its query", c, err, host)
		}
		if !f.List().DeniesAddr(denied) || f.List().DeniesAddr(netip.MustParseAddr("198.51.100.7")) {
			t.Fatalf("a %d replaced the last good list", c)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect's target was fetched %d times", n)
	}
}
