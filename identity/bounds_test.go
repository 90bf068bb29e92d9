package identity

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// An identity value becomes part of Redis keys and log lines: a claim of
// exactly maxClaimBytes of printable bytes (space and '~' included) is the
// user; one byte longer, or holding a control byte (0x00-0x1f, 0x7f), is
// no user. Found by mutation testing (verifier.go's bounds lived).
func TestClaimIsReadUpToItsBoundAndOnlyWhenPrintable(t *testing.T) {
	t.Parallel()
	v := newHS256Verifier(t)
	exp := time.Now().Add(time.Hour).Unix()
	atBound := strings.Repeat("u", maxClaimBytes-2) + " ~"
	for _, tc := range []struct {
		name, sub string
		ok        bool
	}{
		{"at the bound, space and tilde", atBound, true},
		{"one byte past the bound", atBound + "u", false},
		{"0x1f", "user\x1f", false},
		{"0x00", "\x00user", false},
		{"0x7f", "us\x7fer", false},
		{"tab", "us\ter", false},
		{"0x20 only", " ", true},
	} {
		tok := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": tc.sub, "exp": exp}, "")
		id, _ := v.Verify(tok)
		if got := id.UserID == tc.sub; got != tc.ok {
			t.Errorf("%s: identity %q, want read %v", tc.name, id.UserID, tc.ok)
		}
	}
}

// A verifier given only a JWKS URL has no HS256 key: an HS256 token signed
// with an empty key (the algorithm-confusion shape) is no user. Found by
// mutation testing (len(o.Secret) > 0 → >= 0 lived).
func TestJWKSOnlyVerifierRefusesHS256WithAnEmptyKey(t *testing.T) {
	t.Parallel()
	s := newJWKSServer(t)
	s.set("k1", rsaKey(t))
	v := jwksVerifier(t, s.URL, time.Hour)
	exp := time.Now().Add(time.Hour).Unix()
	// Signed by hand: golang-jwt refuses to sign with an empty key.
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	body := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"sub":"intruder","exp":%d}`, exp)))
	mac := hmac.New(sha256.New, nil)
	mac.Write([]byte(head + "." + body))
	tok := head + "." + body + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	if id, ok := v.Verify(tok); ok || id.UserID != "" {
		t.Errorf("HS256 with an empty key verified as %+v", id)
	}
}

// syncBuffer is a bytes.Buffer a logger and a test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A failed JWKS fetch is logged to the logger the caller gave (the
// operator's, not a discarded one), and a nil logger is allowed. Found by
// mutation testing (logger == nil → != nil lived).
func TestJWKSFetchFailureIsLoggedToTheGivenLogger(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	cfg := authConfig()
	cfg.Secret = nil
	cfg.JWKSURL, cfg.JWKSRefresh = srv.URL, time.Hour
	var buf syncBuffer
	v, err := NewVerifier(context.Background(), cfg, slog.New(slog.NewTextHandler(&buf, nil)))
	if err == nil {
		t.Cleanup(func() { _ = v.Stop(context.Background()) })
	}
	if !strings.Contains(buf.String(), "fetching JWKS failed") {
		t.Errorf("the given logger holds %q, want the fetch failure", buf.String())
	}
	v2, err := NewVerifier(context.Background(), cfg, nil)
	if err == nil {
		_ = v2.Stop(context.Background())
	}
}

// Stop ends the verifier's background work: its context is done, so a
// refetch started after it does not run. Found by mutation testing
// (v == nil → v != nil in Stop lived: Stop did nothing).
func TestStopEndsTheVerifiersContext(t *testing.T) {
	t.Parallel()
	s := newJWKSServer(t)
	s.set("k1", rsaKey(t))
	v := jwksVerifier(t, s.URL, time.Hour)
	if err := v.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-v.ctx.Done():
	default:
		t.Fatal("Stop returned and the verifier's context is still live")
	}
	var nilV *Verifier
	if err := nilV.Stop(context.Background()); err != nil {
		t.Errorf("Stop on nil: %v", err)
	}
}

// TestJWKSRedirectIsLoggedWithItsHost: a JWKS URL that redirects fails the
// fetch with a line naming the host it pointed to, never the Location's
// query nor the configured URL's (fresh attack pass 22 E2: the line said
// "invalid HTTP status code: 302" and no more).
func TestJWKSRedirectIsLoggedWithItsHost(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://keys.internal.example:8443/jwks?token=CANARYLOCATION", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	cfg := authConfig()
	cfg.Secret = nil
	cfg.JWKSURL, cfg.JWKSRefresh = srv.URL+"/jwks?token=CANARYURL", time.Hour
	var buf syncBuffer
	v, err := NewVerifier(context.Background(), cfg, slog.New(slog.NewTextHandler(&buf, nil)))
	if err == nil {
		t.Cleanup(func() { _ = v.Stop(context.Background()) })
	}
	logs := buf.String()
	if !strings.Contains(logs, "a redirect to keys.internal.example:8443") || strings.Contains(logs, "CANARY") {
		t.Errorf("log %q: want the redirect's host and no token", logs)
	}
}
