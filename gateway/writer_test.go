package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestResponseWriterPassesCapabilitiesThrough(t *testing.T) {
	t.Parallel()
	// Through a real server so the underlying writer can flush, hijack
	// and set deadlines.
	results := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &responseWriter{}
		rw.reset(w, 0)
		rc := http.NewResponseController(rw)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
			results <- "deadline: " + err.Error()
		}
		if r.URL.Path == "/hijack" {
			conn, brw, err := rc.Hijack()
			if err != nil {
				results <- "hijack: " + err.Error()
				return
			}
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n\r\n")
			brw.Flush()
			conn.Close()
			if rw.statusOr(0) != 101 || !rw.hijacked {
				results <- "hijack status not recorded"
			}
			results <- "done"
			return
		}
		w.Header().Set("Trailer", "X-Checksum")
		rw.WriteHeader(http.StatusAccepted)
		io.WriteString(rw, "part")
		if err := rc.Flush(); err != nil {
			results <- "flush: " + err.Error()
		}
		w.Header().Set("X-Checksum", "abc")
		if rw.statusOr(0) != 202 || rw.bytes != 4 {
			results <- "status/bytes not recorded"
		}
		results <- "done"
	}))
	defer srv.Close()

	res, err := http.Get(srv.URL + "/flush")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(res.Body)
	res.Body.Close()
	if res.Trailer.Get("X-Checksum") != "abc" {
		t.Errorf("trailer = %q", res.Trailer.Get("X-Checksum"))
	}
	if r := <-results; r != "done" {
		t.Error(r)
	}

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /hijack HTTP/1.1\r\nHost: x\r\n\r\n")
	line, _ := textproto.NewReader(bufio.NewReader(conn)).ReadLine()
	if line != "HTTP/1.1 101 Switching Protocols" {
		t.Errorf("hijacked response = %q", line)
	}
	if r := <-results; r != "done" {
		t.Error(r)
	}
}

func TestResponseWriterInformationalIsNotFinal(t *testing.T) {
	t.Parallel()
	rr := httptest.NewRecorder()
	rw := &responseWriter{}
	rw.reset(rr, 0)
	rw.WriteHeader(http.StatusEarlyHints)
	rw.WriteHeader(http.StatusOK)
	if rw.status != 200 {
		t.Errorf("status = %d, want 200 after 103", rw.status)
	}
}

func TestMergeVary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, "Origin"},
		{[]string{"Origin"}, "Origin"},
		{[]string{"Accept-Encoding"}, "Accept-Encoding, Origin"},
		{[]string{"Origin", "Accept-Encoding, origin"}, "Origin, Accept-Encoding"},
		{[]string{"Accept-Encoding", "*"}, "*"},
		{[]string{"Origin, Access-Control-Request-Method", "Origin"}, "Origin, Access-Control-Request-Method"},
	} {
		h := http.Header{}
		if tc.in != nil {
			h["Vary"] = tc.in
		}
		mergeVary(h, "Origin")
		if got := strings.Join(h["Vary"], "|"); got != tc.want {
			t.Errorf("mergeVary(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// roundTripFunc is an in-process upstream for fuzzing and benchmarks.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func okResponse(r *http.Request) *http.Response {
	return &http.Response{
		StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header:        http.Header{"Content-Type": {"text/plain"}},
		Body:          io.NopCloser(strings.NewReader("ok")),
		ContentLength: 2,
	}
}

func FuzzConnectionHeader(f *testing.F) {
	f.Add("", "X-Forwarded-For")
	f.Add("close, X-Real-IP, X-Request-Id", "Forwarded,  X-Forwarded-Host ,Cookie")
	f.Add("keep-alive", "x-forwarded-proto, X-Hop")
	f.Add(",,,", "Upgrade")
	var (
		mu   sync.Mutex
		seen http.Header
	)
	srv := newServer(f, routes(testRoute(f, "api", "http://upstream.internal")), Deps{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		return okResponse(r), nil
	})})
	f.Fuzz(func(t *testing.T, conn1, conn2 string) {
		req := httptest.NewRequest(http.MethodGet, "http://gw.example.com/", nil)
		req.RemoteAddr = "203.0.113.9:1"
		req.Header["Connection"] = []string{conn1, conn2}
		req.Header.Set("X-Hop", "client")
		req.Header.Set("X-Real-Ip", "6.6.6.6")
		rr := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rr, req)
		if rr.Code != 200 {
			t.Fatalf("status %d", rr.Code)
		}
		mu.Lock()
		got := seen
		mu.Unlock()
		for name, want := range map[string]string{
			"X-Forwarded-For": "203.0.113.9", "X-Real-Ip": "203.0.113.9",
			"X-Forwarded-Host": "gw.example.com", "X-Forwarded-Proto": "http",
			"X-Request-Id": rr.Header().Get("X-Request-Id"),
		} {
			if v := got.Values(name); len(v) != 1 || v[0] != want {
				t.Fatalf("Connection %q %q: upstream %s = %q, want %q", conn1, conn2, name, v, want)
			}
		}
		if v := got.Get("Forwarded"); !strings.HasPrefix(v, "for=203.0.113.9;") {
			t.Fatalf("Forwarded = %q", v)
		}
		for _, line := range []string{conn1, conn2} {
			for tok := range strings.SplitSeq(line, ",") {
				tok = textproto.TrimString(tok)
				if strings.EqualFold(tok, "X-Hop") && got.Get("X-Hop") != "" {
					t.Fatalf("X-Hop named in Connection reached the upstream")
				}
			}
		}
		if got.Get("Connection") != "" {
			t.Fatalf("Connection reached the upstream: %q", got.Get("Connection"))
		}
	})
}

// TestA100BeforeTheAnswerIsNotTheFinalStatus: an informational status,
// 100 Continue included, passes through without becoming the exchange's
// status; the answer after it is.
func TestA100BeforeTheAnswerIsNotTheFinalStatus(t *testing.T) {
	for _, info := range []int{100, 102, 103, 199} {
		var w responseWriter
		w.reset(httptest.NewRecorder(), 0)
		w.WriteHeader(info)
		w.WriteHeader(http.StatusCreated)
		if got := w.statusOr(0); got != http.StatusCreated {
			t.Errorf("%d then 201: status %d, want 201", info, got)
		}
	}
}

// TestSendTimeoutEndsAnExchangeWhoseClientStopsReading: with
// server.send_timeout a client that reads nothing of a large answer fails
// the gateway's write, which ends the exchange and the upstream's
// response (attack pass A83), instead of holding both for ever.
func TestSendTimeoutEndsAnExchangeWhoseClientStopsReading(t *testing.T) {
	t.Parallel()
	ended := make(chan error, 1)
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 4096 { // 256 MiB, far more than the socket buffers hold
			if _, err := w.Write(chunk); err != nil {
				ended <- err
				return
			}
		}
		ended <- nil
	})
	h := newHarness(t, Options{SendTimeout: 200 * time.Millisecond, Routes: []Route{testRoute(t, "api", up.URL)}})
	c, err := net.Dial("tcp", h.front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select { // the client never reads
	case err := <-ended:
		if err == nil {
			t.Fatal("the upstream wrote 256 MiB to a client that reads nothing")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the exchange was still open 20 s after the client stopped reading")
	}
}
