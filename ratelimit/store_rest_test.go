package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/internal/upstashtest"
	"github.com/olp-edu/borda/keyspace"
)

// TestRESTStore_NOSCRIPTFallsBackToEVALOnce: against a fresh Redis (our own
// redis-server, whose script cache is empty) the first Hit costs EVALSHA +
// EVAL, every later one a single EVALSHA.
func TestRESTStore_NOSCRIPTFallsBackToEVALOnce(t *testing.T) {
	t.Parallel()
	addr, _ := privateRedis(t)
	var posts atomic.Int64
	up := upstashtest.New(newRedis(t, "redis://"+addr+"/0"), "tok")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		up.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s, err := NewRESTStore(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ks := keyspace.MustNew(servicetest.KeyPrefix(t))
	hits := []Hit{{Key: ks.RateLimit("burst", "192.0.2.1"), Algorithm: FixedWindow, TTL: time.Second}}
	out := make([]Count, 1)
	for i, want := range []int64{2, 1, 1} {
		posts.Store(0)
		if err := storeHit(context.Background(), s, hits, out); err != nil {
			t.Fatal(err)
		}
		if posts.Load() != want {
			t.Fatalf("hit %d: %d HTTP requests, want %d", i+1, posts.Load(), want)
		}
	}
}

func TestRESTStore_WrongTokenIs401(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	srv := upstashtest.Start(testRedis(t, prefix), "right")
	defer srv.Close()
	s, err := NewRESTStore(srv.URL, "wrong", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Ping(context.Background())
	var re *RESTError
	if !errors.As(err, &re) || re.Status != http.StatusUnauthorized {
		t.Fatalf("err = %v, want a 401 RESTError", err)
	}
}

func TestRESTStore_ErrorReplyIsRESTError(t *testing.T) {
	t.Parallel()
	prefix := servicetest.KeyPrefix(t)
	srv := upstashtest.Start(testRedis(t, prefix), "tok")
	defer srv.Close()
	s, _ := NewRESTStore(srv.URL, "tok", nil)
	_, err := s.Do(context.Background(), "NOSUCHCOMMAND")
	var re *RESTError
	if !errors.As(err, &re) || re.Status != http.StatusBadRequest || re.Message == "" {
		t.Fatalf("err = %v, want a 400 RESTError", err)
	}
}

func TestNewRESTStore_RefusesBadURLAndEmptyToken(t *testing.T) {
	t.Parallel()
	if _, err := NewRESTStore("ftp://x", "t", nil); err == nil {
		t.Error("ftp URL accepted")
	}
	if _, err := NewRESTStore("https://x.upstash.io", "", nil); err == nil {
		t.Error("empty token accepted")
	}
}

// TestRESTStore_ARedirectIsNeverFollowed: an endpoint that answers a
// redirect (a misconfigured URL, a hostile proxy) fails the command with
// the host it pointed to; the commands and the token never reach the
// target.
func TestRESTStore_ARedirectIsNeverFollowed(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer target.Close()
	for _, code := range []int{302, 307, 308} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/", code)
		}))
		s, err := NewRESTStore(srv.URL, "tok3n", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Ping(context.Background())
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "redirect") || strings.Contains(err.Error(), "tok3n") {
			t.Fatalf("a %d: Ping = %v; want a redirect error without the token", code, err)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect's target was called %d times", n)
	}
}
