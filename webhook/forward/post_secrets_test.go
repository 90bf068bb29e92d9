package forward

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/egress"
	"github.com/olp-edu/borda/internal/redact"
	"github.com/olp-edu/borda/webhook/envelope"
)

// newSecretPoster is a poster on legacyURL as forward.New builds it.
func newSecretPoster(legacyURL, hmac string) *poster {
	return &poster{client: &http.Client{}, url: legacyURL, secret: []byte(hmac), timeout: 5 * time.Second,
		scrub: func(text string) string {
			return redact.Secrets(text, append(redact.URLSecrets(legacyURL), hmac))
		}}
}

// TestPostNetworkErrorDoesNotLeakTheLegacyURLToken: net/http's *url.Error
// embeds LEGACY_WEBHOOK_URL whole, userinfo and ?token= included; the
// excerpt (logged, stored in x-borda-dlq-excerpt) must not.
func TestPostNetworkErrorDoesNotLeakTheLegacyURLToken(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens: connection refused
	for _, u := range []string{
		"http://legacy:CANARYPASS@" + addr + "/hook?token=CANARYTOKEN",
		"http://CANARYUSERTOKEN@" + addr + "/hook",
		"http://" + addr + "/hook?CANARYBARE",
	} {
		r := newSecretPoster(u, "hmac-secret").post(context.Background(), envelope.Envelope{ID: "e1", Body: []byte("{}")}, time.Now())
		if r.Kind != Retryable || r.Class != "network" {
			t.Fatalf("%s: %+v, want a retryable network failure", u, r)
		}
		if strings.Contains(r.Excerpt, "CANARY") || !strings.Contains(r.Excerpt, addr) {
			t.Errorf("excerpt %q: want the host and no secret", r.Excerpt)
		}
	}
}

// TestPostReplyEchoingTheTokenIsScrubbed: a legacy endpoint that echoes
// its request line (or the HMAC secret) in an error body does not put the
// token in the DLQ excerpt, whether percent-encoded or not, nor a piece of
// it when it straddles the 256-byte cut.
func TestPostReplyEchoingTheTokenIsScrubbed(t *testing.T) {
	t.Parallel()
	const token = "CANARY/tok+en"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		if r.URL.Path == "/straddle" {
			_, _ = w.Write([]byte(strings.Repeat("x", excerptBytes-4) + token))
			return
		}
		_, _ = w.Write([]byte("bad request " + r.URL.RawQuery + " decoded " + r.URL.Query().Get("token") + " hmac CANARYHMAC"))
	}))
	defer srv.Close()
	query := "?token=" + strings.NewReplacer("/", "%2F", "+", "%2B").Replace(token)
	for _, path := range []string{"/echo", "/straddle"} {
		r := newSecretPoster(srv.URL+path+query, "CANARYHMAC").post(context.Background(), envelope.Envelope{ID: "e1", Body: []byte("{}")}, time.Now())
		if r.Kind != Permanent || r.Status != 400 {
			t.Fatalf("%s: %+v, want a permanent 400", path, r)
		}
		if strings.Contains(r.Excerpt, "CANA") {
			t.Errorf("%s: excerpt %q holds (a piece of) the secret", path, r.Excerpt)
		}
	}
	r := newSecretPoster(srv.URL+"/echo"+query, "CANARYHMAC").post(context.Background(), envelope.Envelope{ID: "e1", Body: []byte("{}")}, time.Now())
	if r.Excerpt != "bad request token=xxxxx decoded xxxxx hmac xxxxx" {
		t.Errorf("excerpt %q: want the reply with the secrets scrubbed", r.Excerpt)
	}
}

// TestLegacyReplyExcerptRedactsCredentialParameters (attack B07): a legacy
// endpoint that echoes credentials in its reply (token=, password=,
// "secret":, api_key=, Authorization: Bearer) gets an excerpt, for the
// log and the dead letter, without their values, through the real poster.
func TestLegacyReplyExcerptRedactsCredentialParameters(t *testing.T) {
	t.Parallel()
	replies := []string{
		"token=CANARY1 password=CANARY2", `{"secret":"CANARY3","api_key": "CANARY4"}`, "Authorization: Bearer CANARY5",
		"PASSWORD=CANARY6&Api-Key=CANARY7", `erro: \"client_secret\":\"CANARY8\"`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(replies[len(r.URL.Path)%len(replies)]))
	}))
	defer srv.Close()
	for n := range replies {
		path := "/" + strings.Repeat("p", n)
		r := newSecretPoster(srv.URL+path, "HMACSECRET").post(context.Background(), envelope.Envelope{ID: "e1", Body: []byte("{}")}, time.Now())
		if r.Status != 422 || r.Excerpt == "" || strings.Contains(r.Excerpt, "CANARY") {
			t.Errorf("reply %q: excerpt %q (status %d), want it without the values", replies[n], r.Excerpt, r.Status)
		}
	}
}

// TestPostRedirectIsPermanentAndNamesItsHost: a legacy endpoint answering
// a redirect is not followed (the client is egress's) and the event is
// dead-lettered with a reason that names the host it pointed to, never
// the Location's path or query, nor the legacy URL's own token (fresh
// attack pass 22 E2: the reason said "3xx (HTTP 307)" and no more).
func TestPostRedirectIsPermanentAndNamesItsHost(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer target.Close()
	for _, code := range []int{301, 302, 307, 308} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/internal?token=CANARYLOCATION", code)
		}))
		p := newSecretPoster(srv.URL+"/hook?token=CANARYTOKEN", "hmac-secret")
		p.client = egress.Client(nil, 0)
		r := p.post(context.Background(), envelope.Envelope{ID: "e1", Body: []byte("{}")}, time.Now())
		srv.Close()
		host := strings.TrimPrefix(target.URL, "http://")
		if r.Kind != Permanent || r.Status != code || !strings.Contains(r.Excerpt, "redirect to "+host) || strings.Contains(r.Excerpt, "CANARY") {
			t.Errorf("a %d: %+v; want a permanent failure whose excerpt names %s and no secret", code, r, host)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect's target was called %d times", n)
	}
}
