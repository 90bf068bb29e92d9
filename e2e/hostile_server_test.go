package e2e

// Hostile clients against the server's connection handling (docs/edge.md,
// "Client connections and request bodies"): bodies that never come or
// trickle, early answers with an unread body, broken framing, the HTTP/2
// preface, and many slow clients at once.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// serverMetric returns the sum of the admin /metrics samples whose line
// starts with series (a metric name, optionally with the opening of its
// labels), or -1 when there is none.
func serverMetric(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	total, found := 0.0, false
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, series) {
			continue
		}
		rest := line[len(series):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{' && rest[0] != ',' && !strings.HasSuffix(series, "{")) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			total, found = total+v, true
		}
	}
	if !found {
		return -1
	}
	return total
}

// serverRaw writes head on a new connection, then answers what comes back
// within within: the status line's code (0 when none came), the body, and
// whether the gateway closed the connection after the answer.
func serverRaw(t *testing.T, base, head string, within time.Duration) (int, string, bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", hostPort(base), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(within))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return serverReadAnswer(conn)
}

func serverReadAnswer(conn net.Conn) (int, string, bool) {
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err.Error(), false
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte() // EOF: the gateway closed; a timeout: still open
	closed := err == io.EOF || (err != nil && !isNetTimeout(err))
	return resp.StatusCode, string(body), closed
}

func isNetTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestBodyThatNeverComesIsAnswered408AndClosed: Content-Length 1000 and
// no body, on a proxied route. The old gateway waited for the body for
// ever (the upstream waited too; no answer within the test's 15 s). Now
// server.body_timeout answers 408 and closes the connection, counted as
// the client's fault, never the upstream's.
func TestBodyThatNeverComesIsAnswered408AndClosed(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", "server:\n  body_timeout: 1s\n"))
	for _, method := range []string{"POST", "GET", "PUT"} {
		started := time.Now()
		code, body, closed := serverRaw(t, p.public, method+" /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n", 15*time.Second)
		if code != http.StatusRequestTimeout || !strings.Contains(body, "Tempo de envio esgotado") {
			t.Errorf("%s with a body that never comes: got %d %q, want 408 with a PT-BR problem", method, code, body)
		}
		if !closed {
			t.Errorf("%s: connection left open after the 408", method)
		}
		t.Logf("%s answered and closed in %v", method, time.Since(started).Round(time.Millisecond))
	}
	if v := serverMetric(t, p.admin, `borda_client_errors_total{kind="body_timeout",route="app"}`); v != 3 {
		t.Errorf("borda_client_errors_total{kind=body_timeout} = %v, want 3", v)
	}
	if v := serverMetric(t, p.admin, "borda_upstream_errors_total"); v > 0 {
		t.Errorf("a stalled client body was counted as %v upstream errors", v)
	}
}

// TestTrickledBodyIsCutAtTheMinimumRate: a body sent a byte every 100 ms
// (10 B/s, far under body_min_rate 500 B/s) keeps every single wait short,
// so an idle timeout alone never fires; the old gateway took the 100 s
// the body needed. Now it is answered 408 at about body_timeout.
func TestTrickledBodyIsCutAtTheMinimumRate(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", "server:\n  body_timeout: 1s\n  body_min_rate: 500\n"))
	conn, err := net.DialTimeout("tcp", hostPort(p.public), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 1000 {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
		}
	})
	code, body, _ := serverReadAnswer(conn)
	close(stop)
	wg.Wait()
	if code != http.StatusRequestTimeout {
		t.Fatalf("trickled body: got %d %q, want 408", code, body)
	}
	for _, r := range up.requests() {
		if len(r.Body) == 1000 { // a partial body is the aborted exchange
			t.Errorf("the upstream received the whole trickled body")
		}
	}
}

// TestRouteTimeoutWhileWaitingForTheClientBodyReachesTheClient: the route
// timeout (1 s) passes while the transport still waits for the client's
// body. The old gateway logged 504 but the client never received it (the
// answer waited behind the blocked body read) and it was counted as
// borda_upstream_errors_total{kind="timeout"}. Now the client gets 408
// at the route timeout: the upstream was waiting for the client.
func TestRouteTimeoutWhileWaitingForTheClientBodyReachesTheClient(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "    timeout: 1s\n", "server:\n  body_timeout: 60s\n"))
	code, body, closed := serverRaw(t, p.public, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\npartial", 15*time.Second)
	if code != http.StatusRequestTimeout || !closed {
		t.Fatalf("got %d %q (closed %v), want 408 and the connection closed", code, body, closed)
	}
	if v := serverMetric(t, p.admin, "borda_upstream_errors_total"); v > 0 {
		t.Errorf("the client's late body was counted as %v upstream errors", v)
	}
}

// TestEarlyAnswersWithAnUnreadBodyReachTheClient: answers given without
// reading the body (429 from a rate limit, 401 from the webhook ingress,
// the probes) were never received: net/http first tried to drain a body
// that never came. Now each goes out with Connection: close.
func TestEarlyAnswersWithAnUnreadBodyReachTheClient(t *testing.T) {
	up := recordingUpstream(t)
	cfg := minimalServe(up.URL, "    rate_limits: [tight]\n", `rate_limits:
  rules:
    - {name: tight, scope: ip, limit: 1, window: 1m, mode: enforce}
webhook:
  path: /webhooks/whatsapp
`)
	p := startServe(t, cfg, "WEBHOOK_TOKENS=e2e-token")
	if resp := get(t, p.public+"/first", ""); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	for _, c := range []struct {
		name, head string
		want       int
	}{
		{"429 from the rate limit", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n", 429},
		{"429, chunked body", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 429},
		{"401 from the webhook ingress", "POST /webhooks/whatsapp HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", 401},
		{"healthz", "POST /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n", 200},
	} {
		code, body, closed := serverRaw(t, p.public, c.head, 10*time.Second)
		if code != c.want || !closed {
			t.Errorf("%s: got %d %q (closed %v), want %d and the connection closed", c.name, code, body, closed, c.want)
		}
	}
}

// TestMalformedChunkedBodyIsTheClientsFault: broken chunked framing was
// answered 502 "Não foi possível contatar o serviço de destino", counted
// as borda_upstream_errors_total{kind="protocol"} and logged at warn. It
// is the client's error: 400, borda_client_errors_total.
func TestMalformedChunkedBodyIsTheClientsFault(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	bodies := map[string]string{
		"invalid chunk size":         "zz\r\nhello\r\n0\r\n\r\n",
		"bare LF":                    "5\nhello\n0\n\n",
		"chunk longer than its size": "2\r\nhello\r\n0\r\n\r\n",
	}
	for name, b := range bodies {
		code, body, closed := serverRaw(t, p.public, "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"+b, 10*time.Second)
		if code != http.StatusBadRequest || strings.Contains(body, "serviço de destino") || !closed {
			t.Errorf("%s: got %d %q (closed %v), want 400 and the connection closed", name, code, body, closed)
		}
	}
	if v := serverMetric(t, p.admin, "borda_upstream_errors_total"); v > 0 {
		t.Errorf("malformed client bodies counted as %v upstream errors", v)
	}
	if v := serverMetric(t, p.admin, `borda_client_errors_total{kind="malformed_body"`); v != float64(len(bodies)) {
		t.Errorf("borda_client_errors_total{kind=malformed_body} = %v, want %d", v, len(bodies))
	}
	if strings.Contains(p.logs.String(), `"msg":"upstream exchange failed"`) {
		t.Errorf("a client framing error was logged as an upstream failure")
	}
}

// TestHTTP2PrefaceAndNonPathTargetsAreNotProxied: "PRI * HTTP/2.0" was
// routed and proxied as a request; so were asterisk-form targets of other
// methods and CONNECT's authority form. Now: 505 for the preface, 400 for
// the others, and the upstream sees nothing.
func TestHTTP2PrefaceAndNonPathTargetsAreNotProxied(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	for _, c := range []struct {
		name, head string
		want       int
	}{
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
		{"GET *", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"CONNECT authority-form", "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n", 400},
	} {
		code, body, _ := serverRaw(t, p.public, c.head, 10*time.Second)
		if code != c.want {
			t.Errorf("%s: got %d %q, want %d", c.name, code, body, c.want)
		}
	}
	if got := up.requests(); len(got) != 0 {
		t.Errorf("the upstream received %d of them: %+v", len(got), got)
	}
	// OPTIONS * stays net/http's own answer.
	if code, body, _ := serverRaw(t, p.public, "OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second); code != 200 {
		t.Errorf("OPTIONS *: got %d %q, want 200", code, body)
	}
}

// TestThreeHundredSlowClientsAreBoundedAndAllAnswered: 300 clients each
// announce a 1000-byte body and send none. The old gateway kept every one
// open for ever (300 of them held 900 goroutines and 12 MB, and none was
// answered). Now each is answered 408 within body_timeout (3 s) plus a
// margin, and the gateway's goroutines and memory (its own /metrics)
// return to where they were.
func TestThreeHundredSlowClientsAreBoundedAndAllAnswered(t *testing.T) {
	const clients = 300
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", "server:\n  body_timeout: 3s\n  body_min_rate: 0\n"))
	baseG := serverMetric(t, p.admin, "go_goroutines")
	baseRSS := serverMetric(t, p.admin, "process_resident_memory_bytes")

	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.DialTimeout("tcp", hostPort(p.public), 5*time.Second)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3*time.Second + 20*time.Second))
		if _, err := io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	peakG := serverMetric(t, p.admin, "go_goroutines")
	peakRSS := serverMetric(t, p.admin, "process_resident_memory_bytes")
	codes := make([]int, clients)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { codes[i], _, _ = serverReadAnswer(c) })
	}
	wg.Wait()
	unanswered := 0
	for _, code := range codes {
		if code != http.StatusRequestTimeout {
			unanswered++
		}
	}
	if unanswered > 0 {
		t.Errorf("%d of %d slow clients were not answered 408 within body_timeout + 20 s", unanswered, clients)
	}
	var afterG float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		afterG = serverMetric(t, p.admin, "go_goroutines")
		if afterG <= baseG+20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	afterRSS := serverMetric(t, p.admin, "process_resident_memory_bytes")
	t.Logf("goroutines: %v before, %v with %d slow clients, %v after; RSS MiB (race build): %.1f, %.1f, %.1f",
		baseG, peakG, clients, afterG, baseRSS/(1<<20), peakRSS/(1<<20), afterRSS/(1<<20))
	if peakG > baseG+4*clients {
		t.Errorf("%v goroutines for %d slow clients (base %v): more than 4 each", peakG, clients, baseG)
	}
	if afterG > baseG+20 {
		t.Errorf("%v goroutines 10 s after every slow client was answered (base %v): connections leaked", afterG, baseG)
	}
	if peakRSS-baseRSS > 200<<20 {
		t.Errorf("RSS grew by %.1f MiB for %d slow clients", (peakRSS-baseRSS)/(1<<20), clients)
	}
}

// TestMaxConnectionsCapsOpenClientConnections: with server.max_connections
// 20, 50 clients that never send their body are served 20 at a time (the
// rest wait in the accept queue): the open-connection gauge never passes
// 20, and every client is still answered. The old gateway had no cap (and
// no such key: the config was refused).
func TestMaxConnectionsCapsOpenClientConnections(t *testing.T) {
	const clients, limit = 50, 20
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", fmt.Sprintf("server:\n  body_timeout: 1s\n  body_min_rate: 0\n  max_connections: %d\n", limit)))
	// startServe's own /healthz probe may still be closing; wait until no
	// connection is open.
	deadline := time.Now().Add(5 * time.Second)
	for serverMetric(t, p.admin, "borda_http_connections_open") > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	codes := make([]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			codes[i], _, _ = serverRaw(t, p.public, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n", 30*time.Second)
		})
	}
	done := make(chan struct{})
	allDone := waitGroupDone(&wg)
	maxOpen := 0.0
	go func() {
		defer close(done)
		for range 2000 {
			v := serverMetric(t, p.admin, "borda_http_connections_open")
			maxOpen = max(maxOpen, v)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-allDone:
				return
			}
		}
	}()
	wg.Wait()
	<-done
	for i, code := range codes {
		if code != http.StatusRequestTimeout {
			t.Errorf("client %d: got %d, want 408", i, code)
		}
	}
	if maxOpen > limit {
		t.Errorf("borda_http_connections_open reached %v, over max_connections %d", maxOpen, limit)
	}
	if maxOpen < limit {
		t.Logf("the gauge peaked at %v (sampled)", maxOpen)
	}
}

func waitGroupDone(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch
}
