package identity

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// jwksServer is a stand-in JWKS endpoint whose key set a test changes.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	keys    map[string]*rsa.PrivateKey
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T) *jwksServer {
	t.Helper()
	s := &jwksServer{keys: map[string]*rsa.PrivateKey{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		var parts []string
		for kid, k := range s.keys {
			parts = append(parts, fmt.Sprintf(`{"kty":"RSA","kid":%q,"alg":"RS256","use":"sig","n":%q,"e":"AQAB"}`, kid, b64(k.N.Bytes())))
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"keys":[%s]}`, strings.Join(parts, ","))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(kid string, k *rsa.PrivateKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k == nil {
		delete(s.keys, kid)
	} else {
		s.keys[kid] = k
	}
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// eventually polls cond every 10 ms until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func jwksVerifier(t *testing.T, url string, refresh time.Duration) *Verifier {
	t.Helper()
	cfg := authConfig()
	cfg.Secret = nil
	cfg.JWKSURL, cfg.JWKSRefresh = url, refresh
	v, err := NewVerifier(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Stop(context.Background()) })
	return v
}

// A key removed from the JWKS kept verifying its (cached) tokens for up to
// the cache's minute after the fetch that dropped it (6 minutes with the
// old 5-minute refresh). Now the fetch that changes the key set forgets
// the cached tokens: the token stops verifying at the next fetch.
func TestKeyRemovedFromJWKSStopsVerifyingAtTheNextFetch(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t)
	old, next := rsaKey(t), rsaKey(t)
	srv.set("old", old)
	v := jwksVerifier(t, srv.URL, 50*time.Millisecond)
	claims := jwt.MapClaims{"sub": "u-rot", "exp": time.Now().Add(time.Hour).Unix()}
	tokOld := sign(t, jwt.SigningMethodRS256, old, claims, "old")
	if _, ok := v.Verify(tokOld); !ok {
		t.Fatal("token of the published key did not verify")
	}
	srv.set("next", next)
	srv.set("old", nil)
	eventually(t, "the token of the removed key still verifies", func() bool {
		_, ok := v.Verify(tokOld)
		return !ok
	})
	if id, ok := v.Verify(sign(t, jwt.SigningMethodRS256, next, claims, "next")); !ok || id.UserID != "u-rot" {
		t.Errorf("token of the new key: %+v %v", id, ok)
	}
}

// A token signed by a key the issuer just published (its kid not in the
// key set yet) starts one background fetch; it verifies once that fetch
// is done, and further unknown kids fetch at most once every
// UnknownKIDRefetchEvery (injected clock).
func TestUnknownKIDTriggersARateLimitedRefetch(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t)
	k1, k2 := rsaKey(t), rsaKey(t)
	srv.set("k1", k1)
	v := jwksVerifier(t, srv.URL, time.Hour)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	v.now = func() time.Time { return time.Unix(0, clock.Load()) }
	if got := srv.fetches.Load(); got != 1 {
		t.Fatalf("%d fetches at start, want 1", got)
	}
	claims := jwt.MapClaims{"sub": "u-new", "exp": time.Now().Add(time.Hour).Unix()}
	srv.set("k2", k2)
	tok2 := sign(t, jwt.SigningMethodRS256, k2, claims, "k2")
	if _, ok := v.Verify(tok2); ok {
		t.Log("verified at once (the fetch was faster than Verify's return)")
	}
	eventually(t, "the token of the newly published key never verified", func() bool {
		_, ok := v.Verify(tok2)
		return ok
	})
	eventually(t, "refetch still running", func() bool { return !v.refetching.Load() })
	if got := srv.fetches.Load(); got != 2 {
		t.Fatalf("%d fetches after one unknown kid, want 2", got)
	}
	unknown := sign(t, jwt.SigningMethodRS256, rsaKey(t), claims, "made-up")
	for range 20 {
		if _, ok := v.Verify(unknown); ok {
			t.Fatal("made-up kid verified")
		}
	}
	if got := srv.fetches.Load(); got != 2 {
		t.Fatalf("%d fetches: unknown kids within %s fetched again", got, UnknownKIDRefetchEvery)
	}
	clock.Add(int64(UnknownKIDRefetchEvery))
	v.Verify(unknown)
	eventually(t, "no refetch after the interval", func() bool { return srv.fetches.Load() == 3 })
	eventually(t, "refetch still running", func() bool { return !v.refetching.Load() })
	v.Verify(unknown)
	if got := srv.fetches.Load(); got != 3 {
		t.Errorf("%d fetches, want 3", got)
	}
}

// A fetch that returns the same keys keeps the verified cache; a changed
// set starts a new generation.
func TestKeySetGenerationChangesOnlyWithTheKeys(t *testing.T) {
	t.Parallel()
	k := &keySet{Storage: jwkset.NewMemoryStorage()}
	mk := func(key *rsa.PrivateKey, kid string) jwkset.JWK {
		j, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid}})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a, b := mk(rsaKey(t), "a"), mk(rsaKey(t), "b")
	ctx := context.Background()
	steps := []struct {
		keys []jwkset.JWK
		gen  uint64
	}{{[]jwkset.JWK{a}, 1}, {[]jwkset.JWK{a}, 1}, {[]jwkset.JWK{a, b}, 2}, {[]jwkset.JWK{a, b}, 2}, {[]jwkset.JWK{b}, 3}, {nil, 4}}
	for i, s := range steps {
		if err := k.KeyReplaceAll(ctx, s.keys); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if g := k.generation(); g != s.gen {
			t.Errorf("step %d: generation %d, want %d", i, g, s.gen)
		}
	}
}

// Fresh attack pass 21, a hostile or broken key server: a 400 MB document
// grew the gateway to 1.75 GB at every refresh (A14), a redirect was
// followed to any address (A13), and a 200 without keys made every token
// anonymous (A46). Each answer below fails the fetch and the last keys
// stay: a token of the published key keeps verifying; the redirect's
// target is never fetched; and the documents read are bounded. An
// explicit empty set still revokes every key (an issuer's only key
// compromised).
func TestHostileJWKSAnswersKeepTheLastKeys(t *testing.T) {
	t.Parallel()
	key := rsaKey(t)
	good := fmt.Sprintf(`{"keys":[{"kty":"RSA","kid":"k","alg":"RS256","use":"sig","n":%q,"e":"AQAB"}]}`, b64(key.N.Bytes()))
	var target atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target.Add(1)
		_, _ = fmt.Fprint(w, good)
	}))
	t.Cleanup(internal.Close)
	var mode atomic.Value
	mode.Store("good")
	var fetches, sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch mode.Load().(string) {
		case "good":
			_, _ = fmt.Fprint(w, good)
		case "huge": // a valid document with a 64 MiB kid
			_, _ = fmt.Fprint(w, `{"keys":[{"kty":"RSA","alg":"RS256","use":"sig","e":"AQAB","n":"`+b64(key.N.Bytes())+`","kid":"`)
			chunk := []byte(strings.Repeat("A", 64<<10))
			for range 1024 {
				n, err := w.Write(chunk)
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
			_, _ = fmt.Fprint(w, `"}]}`)
		case "redirect":
			http.Redirect(w, r, internal.URL+"/internal-secret", http.StatusFound)
		case "no keys":
			_, _ = fmt.Fprint(w, `{"error":"maintenance"}`)
		case "keys not a list":
			_, _ = fmt.Fprint(w, `{"keys":{"kty":"RSA"}}`)
		case "empty":
			_, _ = fmt.Fprint(w, `{"keys":[]}`)
		}
	}))
	t.Cleanup(srv.Close)
	v := jwksVerifier(t, srv.URL, 20*time.Millisecond)
	tok := sign(t, jwt.SigningMethodRS256, key, jwt.MapClaims{"sub": "u-k", "exp": time.Now().Add(time.Hour).Unix()}, "k")
	if _, ok := v.Verify(tok); !ok {
		t.Fatal("the token of the published key did not verify")
	}
	for _, m := range []string{"huge", "redirect", "no keys", "keys not a list"} {
		mode.Store(m)
		gen := v.keys.generation()
		from := fetches.Load()
		eventually(t, m+": three refreshes", func() bool { return fetches.Load() >= from+3 })
		if _, ok := v.Verify(tok); !ok || v.keys.generation() != gen {
			t.Errorf("%s: the last keys were not kept (verifies %v, generation %d → %d)", m, ok, gen, v.keys.generation())
		}
	}
	if n := target.Load(); n != 0 {
		t.Errorf("the redirect's target was fetched %d times, want never", n)
	}
	if per := sent.Load() / 3; per > 16*JWKSMaxBytes {
		t.Errorf("the server wrote %d bytes per huge fetch before the reader stopped, want about %d", per, JWKSMaxBytes)
	}
	mode.Store("empty")
	eventually(t, "an explicit empty set did not revoke the key", func() bool {
		_, ok := v.Verify(tok)
		return !ok
	})
}
