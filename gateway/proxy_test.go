package gateway

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The proxy's header, path, stream, upgrade, cookie and Host handling
// (docs/edge.md, "Routes" and "Cookies"), each through the full public
// handler (observe → recover → dispatch → CORS → identity → limit →
// proxy).

func TestEmptyFirstConnectionLineStillStripsNamedHeaders(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	res, _, _ := rawRequest(t, h.front.Listener.Addr().String(), "GET / HTTP/1.1\r\n"+
		"Host: api.example.com\r\n"+
		"Connection: \r\n"+
		"Connection: X-Forwarded-For, X-Hop\r\n"+
		"X-Hop: secret\r\n"+
		"X-Forwarded-For: 6.6.6.6\r\n\r\n")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", res.StatusCode)
	}
	got := up.last(t).Header
	if v := got.Get("X-Hop"); v != "" {
		t.Errorf("X-Hop = %q reached the upstream; headers named in any Connection line must be stripped", v)
	}
	if v := got.Values("X-Forwarded-For"); len(v) != 1 || v[0] != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want the gateway's [127.0.0.1]", v)
	}
	if v := got.Get("Connection"); v != "" {
		t.Errorf("Connection = %q reached the upstream", v)
	}
}

func TestConnectionCannotRemoveGatewaySetHeaders(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	req := h.newRequest(t, http.MethodGet, "gw.example.com", "/")
	req.Header.Set("Connection", "close, X-Real-IP, X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto, Forwarded, X-Request-Id, Authorization, X-RateLimit-Would-Block")
	req.Header.Set("X-Real-IP", "198.51.100.7")
	req.AddCookie(&http.Cookie{Name: "olp_auth", Value: "tok"})
	h.limiter.decide = func(_ ratelimitSubject) ratelimitVerdict { return wouldBlockVerdict() }
	res := h.do(t, req)
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	got := up.last(t).Header
	for name, want := range map[string]string{
		"X-Real-Ip":               "127.0.0.1",
		"X-Forwarded-For":         "127.0.0.1",
		"X-Forwarded-Host":        "gw.example.com",
		"X-Forwarded-Proto":       "http",
		"Forwarded":               `for=127.0.0.1;host="gw.example.com";proto=http`,
		"X-Request-Id":            res.Header.Get("X-Request-Id"),
		"Authorization":           "Bearer tok",
		"X-Ratelimit-Would-Block": "true",
	} {
		if v := got.Get(name); v != want {
			t.Errorf("upstream %s = %q, want %q", name, v, want)
		}
	}
}

func TestSpoofedForwardedHeadersAreReplaced(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Routes: []Route{testRoute(t, "api", up.URL)}})
	tests := []struct {
		name, peer, xff, realIP, want string
	}{
		{"untrusted peer spoofing loopback", "203.0.113.9:5555", "127.0.0.1", "127.0.0.1", "203.0.113.9"},
		{"trusted proxy, rightmost untrusted entry", "10.0.0.1:80", "1.1.1.1, 198.51.100.1, 10.0.0.2", "", "198.51.100.1"},
		{"trusted proxy without XFF", "10.0.0.1:80", "", "", "10.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := h.newRequest(t, http.MethodGet, "", "/")
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			if tc.realIP != "" {
				req.Header.Set("X-Real-IP", tc.realIP)
			}
			req.Header.Set("Forwarded", "for=127.0.0.1")
			rr := h.serve(req, tc.peer)
			if rr.Code != 200 {
				t.Fatalf("status %d", rr.Code)
			}
			got := up.last(t).Header
			if v := got.Values("X-Forwarded-For"); len(v) != 1 || v[0] != tc.want {
				t.Errorf("X-Forwarded-For = %q, want [%s]", v, tc.want)
			}
			if v := got.Get("X-Real-Ip"); v != tc.want {
				t.Errorf("X-Real-IP = %q, want %s", v, tc.want)
			}
			if v := got.Get("Forwarded"); !strings.HasPrefix(v, "for="+tc.want+";") {
				t.Errorf("Forwarded = %q, want for=%s", v, tc.want)
			}
		})
	}
}

func TestEscapedPathJoinKeepsEscapesAndNoDoubleSlash(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	strip := onHosts(under(testRoute(t, "strip", up.URL+"/v2/"), "/api"), "strip.example.net")
	strip.StripPrefix = true
	h := newHarness(t, Options{EscapedSlashes: SlashesKeep, Routes: []Route{
		onHosts(testRoute(t, "legacy", up.URL+"/a"), "legacy.example.net"),
		onHosts(testRoute(t, "slash", up.URL+"/a/"), "slash.example.net"),
		strip,
	}})
	tests := []struct{ host, path, want string }{
		{"legacy.example.net", "/b%2fc", "/a/b%2fc"},
		{"legacy.example.net", "/b%2Fc/d?q=%2F", "/a/b%2Fc/d?q=%2F"},
		{"slash.example.net", "/x", "/a/x"},
		{"slash.example.net", "/", "/a/"},
		{"strip.example.net", "/api/users%2F1", "/v2/users%2F1"},
		{"strip.example.net", "/api", "/v2/"},
		{"strip.example.net", "/ap%69/x", "/v2/x"},
	}
	for _, tc := range tests {
		res := h.do(t, h.newRequest(t, http.MethodGet, tc.host, tc.path))
		if res.StatusCode != 200 {
			t.Errorf("%s%s: status %d", tc.host, tc.path, res.StatusCode)
			continue
		}
		if got := up.last(t).RequestURI; got != tc.want {
			t.Errorf("%s%s: upstream got %q, want %q", tc.host, tc.path, got, tc.want)
		}
	}
}

func TestClientGoneIs499NotA5xx(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	})
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req := h.newRequest(t, http.MethodGet, "", "/slow").WithContext(ctx)
	if _, err := h.front.Client().Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("client error = %v, want its own deadline", err)
	}
	if !eventually(t, 3*time.Second, func() bool { return h.requests("api", "499", "GET") == 1 }) {
		t.Fatalf("requests{code=499} = %v, want 1; logs:\n%s", h.requests("api", "499", "GET"), h.logs)
	}
	for _, code := range []string{"502", "504"} {
		if n := h.requests("api", code, "GET"); n != 0 {
			t.Errorf("requests{code=%s} = %v, want 0", code, n)
		}
	}
	for _, kind := range []string{kindTimeout, kindUnreachable, kindProtocol} {
		if n := h.upstreamErrors("api", kind); n != 0 {
			t.Errorf("upstream_errors{kind=%s} = %v, want 0", kind, n)
		}
	}
	if !eventually(t, 2*time.Second, func() bool { return strings.Contains(h.logs.String(), `"status":499`) }) {
		t.Errorf("access log has no status 499:\n%s", h.logs)
	}
}

func TestStreamsFlushAtOnce(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"application/x-ndjson", "text/event-stream"} {
		t.Run(ct, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", ct)
				for i := 0; ; i++ {
					fmt.Fprintf(w, "data: line %d\n\n", i)
					http.NewResponseController(w).Flush()
					select {
					case <-r.Context().Done():
						return
					case <-release:
						return
					case <-time.After(time.Second):
					}
				}
			})
			t.Cleanup(func() { close(release) })
			api := testRoute(t, "api", up.URL)
			api.CORS, api.ExposeHeaders = &CORSPolicy{AllowedOrigins: []string{"https://portal.example.org"}}, true
			h := newHarness(t, routes(api), withVerifier(t))
			h.limiter.decide = func(ratelimitSubject) ratelimitVerdict { return wouldBlockVerdict() }
			start := time.Now()
			res := h.do(t, h.newRequest(t, http.MethodGet, "", "/stream"))
			line, err := readLineWithin(res.Body, 2*time.Second)
			if err != nil {
				t.Fatalf("first line: %v", err)
			}
			if line != "data: line 0\n" {
				t.Errorf("first line = %q", line)
			}
			if d := time.Since(start); d > 1500*time.Millisecond {
				t.Errorf("first line after %v; streams must flush at once", d)
			}
			if res.Header.Get("Vary") != "Origin" {
				t.Errorf("Vary = %q", res.Header.Get("Vary"))
			}
		})
	}
}

func readLineWithin(r io.Reader, d time.Duration) (string, error) {
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		ch <- result{s, err}
	}()
	select {
	case res := <-ch:
		return res.s, res.err
	case <-time.After(d):
		return "", fmt.Errorf("nothing within %v", d)
	}
}

func TestWebSocketUpgradeThroughFullChain(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, wsEcho(t))
	ws := testRoute(t, "ws", up.URL)
	ws.CORS, ws.ExposeHeaders = &CORSPolicy{AllowedOrigins: []string{"https://portal.example.org"}, AllowCredentials: true}, true
	h := newHarness(t, routes(ws), withVerifier(t))
	res, conn, br := rawRequest(t, h.front.Listener.Addr().String(), "GET /ws HTTP/1.1\r\n"+
		"Host: portal.example.org\r\n"+
		"Origin: https://portal.example.org\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	if res.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status = %d %s, want 101", res.StatusCode, b)
	}
	if got := res.Header.Get("Sec-WebSocket-Accept"); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Errorf("Sec-WebSocket-Accept = %q", got)
	}
	for _, msg := range []string{"olá", "second frame"} {
		if err := writeFrame(conn, []byte(msg), true); err != nil {
			t.Fatal(err)
		}
		got, err := readFrame(br)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != msg {
			t.Errorf("echo = %q, want %q", got, msg)
		}
	}
	conn.Close()
	if !eventually(t, 3*time.Second, func() bool { return h.requests("ws", "101", "GET") == 1 }) {
		t.Errorf("requests{code=101} = %v, want 1", h.requests("ws", "101", "GET"))
	}
	if n := h.requests("ws", "502", "GET"); n != 0 {
		t.Errorf("requests{code=502} = %v", n)
	}
}

// wsEcho is a minimal RFC 6455 server: it answers the handshake (with the
// headers a wrapping handler set on w beside its own) and echoes
// unfragmented frames until the connection closes.
func wsEcho(t testing.TB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "want websocket", http.StatusBadRequest)
			return
		}
		var extra strings.Builder
		for k, vs := range w.Header() {
			for _, v := range vs {
				extra.WriteString(k + ": " + v + "\r\n")
			}
		}
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("upstream hijack: %v", err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n",
			base64.StdEncoding.EncodeToString(sum[:]), extra.String())
		_ = brw.Flush()
		for {
			msg, err := readFrame(brw.Reader)
			if err != nil {
				return
			}
			if err := writeFrame(conn, msg, false); err != nil {
				return
			}
		}
	}
}

func writeFrame(w io.Writer, payload []byte, mask bool) error {
	if len(payload) > 125 {
		return errors.New("test frames are short")
	}
	b := []byte{0x81, byte(len(payload))}
	if mask {
		key := [4]byte{1, 2, 3, 4}
		b[1] |= 0x80
		b = append(b, key[:]...)
		for i, c := range payload {
			b = append(b, c^key[i%4])
		}
	} else {
		b = append(b, payload...)
	}
	_, err := w.Write(b)
	return err
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := uint64(hdr[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return nil, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		return nil, errors.New("frame too long for the test")
	}
	var key [4]byte
	masked := hdr[1]&0x80 != 0
	if masked {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, err
	}
	if masked {
		for i := range p {
			p[i] ^= key[i%4]
		}
	}
	return p, nil
}

func TestSetCookieLinesStaySeparateOnlyDomainRewritten(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "sid=abc; Path=/; Domain=internal.local; HttpOnly")
		w.Header().Add("Set-Cookie", "logout=x; Max-Age=0; Path=/")
		w.Header().Add("Set-Cookie", "olp_mural=m1; Path=/; Domain=internal.local; SameSite=None")
	})
	portal := testRoute(t, "portal", up.URL)
	portal.Cookies.Domain = "portal.example.org"
	h := newHarness(t, routes(portal))
	res := h.do(t, h.newRequest(t, http.MethodGet, "", "/login"))
	got := res.Header.Values("Set-Cookie")
	want := []string{
		"sid=abc; Path=/; Domain=portal.example.org; HttpOnly",
		"logout=x; Max-Age=0; Path=/",
		"olp_mural=m1; Path=/; Domain=portal.example.org; Secure; HttpOnly; SameSite=Lax",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Set-Cookie =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if cs := res.Cookies(); len(cs) != 3 || cs[0].Name != "sid" || cs[0].Value != "abc" {
		t.Errorf("parsed cookies = %v", cs)
	}
}

func TestHostHeaderPolicy(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	upHost := strings.TrimPrefix(up.URL, "http://")
	preserve := onHosts(testRoute(t, "preserve", up.URL), "keep.example.com")
	preserve.PreserveHost = true
	h := newHarness(t, routes(onHosts(testRoute(t, "rewrite", up.URL), "gw.example.com"), preserve))
	h.do(t, h.newRequest(t, http.MethodGet, "gw.example.com", "/"))
	got := up.last(t)
	if got.Host != upHost || got.Header.Get("X-Forwarded-Host") != "gw.example.com" {
		t.Errorf("default: Host = %q, X-Forwarded-Host = %q; want %q and gw.example.com", got.Host, got.Header.Get("X-Forwarded-Host"), upHost)
	}
	h.do(t, h.newRequest(t, http.MethodGet, "keep.example.com", "/"))
	got = up.last(t)
	if got.Host != "keep.example.com" || got.Header.Get("X-Forwarded-Host") != "keep.example.com" {
		t.Errorf("preserve_host: Host = %q, X-Forwarded-Host = %q; want keep.example.com for both", got.Host, got.Header.Get("X-Forwarded-Host"))
	}
}

var _ net.Conn // keep net imported for helpers

// ReverseProxy's Rewrite drops only X-Forwarded-For, -Host and -Proto: an
// untrusted client's X-Forwarded-Prefix, -Port, -Server or -Ssl reached
// the upstream, where frameworks (Spring's ForwardedHeaderFilter, ASP.NET
// UsePathBase, Express trust proxy) build redirects and links from them.
// docs/edge.md ("Client IP"): client X-Forwarded-* are dropped unless the peer is trusted.
func TestUntrustedClientXForwardedStarNeverReachesUpstream(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Routes: []Route{testRoute(t, "api", up.URL)}})
	spoofed := []string{"X-Forwarded-Prefix", "X-Forwarded-Port", "X-Forwarded-Server", "X-Forwarded-Ssl", "X-Forwarded-Scheme", "X_Forwarded_Prefix"}
	req := h.newRequest(t, http.MethodGet, "", "/")
	for _, k := range spoofed {
		req.Header[k] = []string{"evil"}
	}
	if rr := h.serve(req, "203.0.113.9:5555"); rr.Code != 200 {
		t.Fatalf("status %d", rr.Code)
	}
	got := up.last(t).Header
	for k, v := range got {
		if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(k, "_", "-")), "x-forwarded-") && k != "X-Forwarded-For" &&
			k != "X-Forwarded-Host" && k != "X-Forwarded-Proto" {
			t.Errorf("untrusted client's %s reached the upstream: %q", k, v)
		}
	}
	// From a trusted proxy they are believed and pass.
	req = h.newRequest(t, http.MethodGet, "", "/")
	req.Header.Set("X-Forwarded-Prefix", "/portal")
	if rr := h.serve(req, "10.0.0.1:80"); rr.Code != 200 {
		t.Fatalf("status %d", rr.Code)
	}
	if v := up.last(t).Header.Get("X-Forwarded-Prefix"); v != "/portal" {
		t.Errorf("trusted proxy's X-Forwarded-Prefix = %q, want /portal", v)
	}
}

// CGI-style upstreams (PHP-FPM, Rack, WSGI) read X_Real_IP as X-Real-IP:
// a client's X_Real_IP, X_Forwarded_For or X_Request_Id reached the
// upstream beside the gateway's own values and could stand in for them
// (nginx drops such headers by default; Envoy has
// headers_with_underscores_action). headers_with_underscores: allow
// keeps them, for an upstream that needs one.
func TestUnderscoreSpelledHeadersNeverReachTheUpstream(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeepUnderscoreHeaders=%v", keep), func(t *testing.T) {
			up := newRecordingUpstream(t, nil)
			h := newHarness(t, Options{KeepUnderscoreHeaders: keep, Routes: []Route{testRoute(t, "api", up.URL)}})
			req := h.newRequest(t, http.MethodGet, "", "/")
			for _, k := range []string{"X_Real_IP", "X_Forwarded_For", "X_Request_Id", "Legacy_Token"} {
				req.Header[k] = []string{"evil"}
			}
			req.Header.Set("X-Kept", "yes")
			if rr := h.serve(req, "203.0.113.9:5555"); rr.Code != 200 {
				t.Fatalf("status %d", rr.Code)
			}
			got := up.last(t).Header
			if got.Get("X-Kept") != "yes" {
				t.Errorf("an ordinary header was dropped: %v", got)
			}
			var underscored []string
			for k := range got {
				if strings.Contains(k, "_") {
					underscored = append(underscored, k)
				}
			}
			if keep {
				if got.Get("Legacy_Token") != "evil" {
					t.Errorf("headers_with_underscores: allow dropped Legacy_Token: %v", got)
				}
				return
			}
			if len(underscored) > 0 {
				t.Errorf("headers with underscores reached the upstream: %v", underscored)
			}
			if v := got.Get("X-Real-Ip"); v != "203.0.113.9" {
				t.Errorf("X-Real-Ip = %q, want the gateway's 203.0.113.9", v)
			}
		})
	}
}

// TestEveryClientClaimHeaderIsRecognised: the by-length table
// (claimHeadersByLen) holds every name of clientClaimHeaders, in any case
// and with '_' for '-'.
func TestEveryClientClaimHeaderIsRecognised(t *testing.T) {
	for _, name := range clientClaimHeaders {
		for _, k := range []string{name, http.CanonicalHeaderKey(name), strings.ReplaceAll(strings.ToUpper(name), "-", "_")} {
			if !isClientClaimHeader(k) {
				t.Errorf("%q not recognised", k)
			}
		}
	}
	for _, k := range []string{"X-Real-Ipx", "Client-Id", "X-Request-Id", ""} {
		if isClientClaimHeader(k) {
			t.Errorf("%q recognised", k)
		}
	}
}
