package ingress

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// An unauthenticated-looking huge body is never buffered whole:
// Content-Length over the cap is refused before reading, a chunked stream
// is cut at the cap, both before the signature check or any publish, and
// the connection is closed rather than drained.
func TestHugeChunkedBodyRefusedBeforeSignature(t *testing.T) {
	cfg := defaultOptions()
	cfg.Sources = []Source{{Name: "x", Path: "/webhooks/x", Signature: &Signature{
		Scheme: "github", Tolerance: time.Minute, Secrets: []string{"s"}}}}
	pub := &fakePublisher{}
	i, err := New(cfg, pub, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(i)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	const head = "POST /webhooks/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha256=00\r\n"

	t.Run("Content-Length 999999999", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprint(c, head+"Content-Length: 999999999\r\n\r\n{")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer before the body: %v", err)
		}
		if resp.StatusCode != 413 || !resp.Close {
			t.Fatalf("answer = %d close=%v, want 413 and the connection closed", resp.StatusCode, resp.Close)
		}
	})

	t.Run("chunked 200 MB", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprint(c, head+"Transfer-Encoding: chunked\r\n\r\n")
		var sent atomic.Int64
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			chunk := fmt.Sprintf("%x\r\n%s\r\n", 64<<10, strings.Repeat("a", 64<<10))
			for sent.Load() < 200<<20 {
				if _, err := c.Write([]byte(chunk)); err != nil {
					return
				}
				sent.Add(64 << 10)
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		if resp.StatusCode != 413 || !resp.Close {
			t.Fatalf("answer = %d close=%v, want 413 and the connection closed", resp.StatusCode, resp.Close)
		}
		// The writer ends when the server closes the connection (a write
		// fails) or when it has sent everything: wait for that, then the
		// count tells which.
		<-writerDone
		if n := sent.Load(); n > 64<<20 {
			t.Errorf("the server kept reading: %d MB sent", n>>20)
		}
	})
	if len(pub.messages()) != 0 {
		t.Fatal("an oversized body was published")
	}
}

// A request to a signed source is unauthenticated until its body has been
// read and verified, yet the ingress allocated the whole Content-Length (up
// to 10 MB) before reading a byte: a few hundred bytes of headers with a
// fake signature and a body that never comes pinned 10 MB each, for as long
// as the client kept the connection open (the server has no read timeout).
// Before authentication, memory grows only with the bytes actually sent.
func TestUnauthenticatedContentLengthDoesNotReserveTheBody(t *testing.T) {
	cfg := defaultOptions()
	cfg.Sources = []Source{{Name: "x", Path: "/webhooks/x", Signature: &Signature{
		Scheme: "github", Tolerance: time.Minute, Secrets: []string{"s"}}}}
	i, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/x", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-Hub-Signature-256", "sha256=00")
		r.ContentLength = cfg.MaxBodyBytes // claimed, never sent
		w := httptest.NewRecorder()
		i.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("answer = %d %s, want 401", w.Code, w.Body.String())
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 2<<20 {
		t.Errorf("%d unauthenticated requests of 2 bytes allocated %d bytes, want < 2 MiB", n, got)
	}
}

// A body trickled in at one byte a second held the request (and its
// buffer) open for as long as the client liked: the server has no
// ReadTimeout. webhook.body_timeout bounds it: 408, connection closed.
func TestTrickledBodyAnswers408ByTheBodyTimeout(t *testing.T) {
	cfg := flatOptions("tok")
	cfg.BodyTimeout = 300 * time.Millisecond
	c, pub := dialIngress(t, cfg)
	fmt.Fprint(c, "POST /webhooks/whatsapp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte every 100 ms, never finishing in time
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Errorf("answer %d close=%v, want 408 and the connection closed", resp.StatusCode, resp.Close)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered after %v, want about body_timeout (300ms)", d)
	}
	if len(pub.messages()) != 0 {
		t.Errorf("a trickled body was published")
	}
}

func TestUnauthorizedCarriesWWWAuthenticate(t *testing.T) {
	cfg := flatOptions("tok")
	i, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	i.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/webhooks/whatsapp", strings.NewReader("{}")))
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("401 without WWW-Authenticate: %d %v", w.Code, w.Header())
	}
}

// TestZeroBodyTimeoutBoundsNothing: body_timeout 0 means no bound (its
// documented meaning), not a deadline of now: a body whose bytes arrive
// after the handler started, in three parts, is read whole and published.
func TestZeroBodyTimeoutBoundsNothing(t *testing.T) {
	cfg := flatOptions("tok")
	cfg.BodyTimeout = 0
	c, pub := dialIngress(t, cfg)
	body := `{"event":"x","n":1}`
	fmt.Fprintf(c, "POST /webhooks/whatsapp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	for _, part := range []string{body[:5], body[5:10], body[10:]} {
		time.Sleep(30 * time.Millisecond) // the parts arrive after the headers: the handler is reading the connection
		if _, err := c.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("answer %d, want 200: body_timeout 0 must not bound the read", resp.StatusCode)
	}
	if len(pub.messages()) != 1 {
		t.Errorf("%d messages published, want 1", len(pub.messages()))
	}
}

// dialIngress serves an ingress built from cfg on a test server and
// returns a raw connection to it (10 s deadline, closed at cleanup) and
// the ingress's publisher.
func dialIngress(t *testing.T, cfg Options) (net.Conn, *fakePublisher) {
	t.Helper()
	pub := &fakePublisher{}
	i, err := New(cfg, pub, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(i)
	t.Cleanup(srv.Close)
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, pub
}
