package e2e

// Shared helpers of the hostile-input suite (e2e/hostile_*_test.go): each
// attack runs against the real `borda serve` binary (startServe), sends
// what an attacker would (often raw bytes on a TCP connection, so that no
// client library normalizes the request first) and looks at what reached
// the upstream (recordingUpstream). One test per attack, named after what
// it tries; docs/edge.md and docs/webhooks.md state the policy each one
// holds.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// seenRequest is what a recordingUpstream received.
type seenRequest struct {
	Method     string
	RequestURI string // as sent on the wire, escapes kept
	Path       string // decoded
	Header     http.Header
	Body       string
	Trailer    http.Header // the request's trailers, read after its body
}

// recorder is a stand-in upstream that records every request it gets and
// answers 200 "upstream".
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

// recordingUpstream starts a recorder, closed at the end of the test.
func recordingUpstream(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, seenRequest{
			Method: req.Method, RequestURI: req.RequestURI, Path: req.URL.Path,
			Header: req.Header.Clone(), Body: string(body), Trailer: req.Trailer.Clone(),
		})
		r.mu.Unlock()
		_, _ = io.WriteString(w, "upstream")
	}))
	t.Cleanup(r.Close)
	return r
}

// requests returns a copy of what the upstream received so far.
func (r *recorder) requests() []seenRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seenRequest(nil), r.seen...)
}

// hostPort is "127.0.0.1:PORT" of a base URL "http://127.0.0.1:PORT".
func hostPort(base string) string {
	return strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")
}

// rawExchange writes raw (an HTTP/1.1 request exactly as given, CRLFs
// included) on a new TCP connection to base and returns the parsed
// response. The read gives up after timeout; err is then a net timeout.
func rawExchange(t *testing.T, base, raw string, timeout time.Duration) (*http.Response, string, error) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", hostPort(base), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, raw); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body), nil
}

// minimalServe is a `borda serve` config with one route to upstream, the
// embedded store and no broker; extra is appended under the route (indented
// by four spaces) and top holds further top-level YAML.
func minimalServe(upstream, routeExtra, top string) string {
	return `environment: development
listen: "{LISTEN}"
admin_listen: "{ADMIN}"
redis:
  url: ""
amqp:
  url: "amqp://guest:guest@127.0.0.1:1/"
telemetry:
  enabled: false
routes:
  - name: app
    path_prefix: /
    upstream: "` + upstream + `"
` + routeExtra + top
}
