package e2e

// Hostile responses from an untrusted route (docs/edge.md, "Untrusted
// routes"): a third-party upstream behind `cookies: {forward: []}` on the
// portal's host must not act as the portal, and a page on a foreign origin
// must not open a WebSocket that carries the portal's session.

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// A third-party upstream answered with HTML calling /api, Clear-Site-Data
// (logging the user out) and olp_auth in every Set-Cookie spelling a
// browser or a folding client stores as olp_auth (comma-joined, upper
// case, leading spaces and tabs, nameless, hidden after whitespace). The
// browser must get a sandboxed document, no Clear-Site-Data and only the
// third party's own cookie.
func TestHostileThirdPartyRouteActsAsThePortal(t *testing.T) {
	spellings := []string{
		"x=1, olp_auth=evil", "x=1,olp_auth=evil; Path=/", "x=1, OLP_AUTH=evil", "x=1; Path=/, olp_auth=evil; Path=/",
		"olp_auth=evil", "OLP_AUTH=evil", " olp_auth=evil", "\tolp_auth=evil", "Olp_Auth=evil; Max-Age=0",
		"__Host-olp_auth=evil; Secure; Path=/", "__secure-OLP_AUTH=evil; Secure", "=olp_auth=evil", "x=1 olp_auth=evil",
		"olp%5Fauth=evil", "olp.auth=evil",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Set-Cookie"] = append(slices.Clone(spellings), "tp=1; Path=/")
		w.Header().Set("Clear-Site-Data", `"cookies"`)
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<script>fetch("/api/me").then(r => r.text())</script>`)
	}))
	t.Cleanup(srv.Close)
	p := startServe(t, minimalServe(srv.URL, "    cookies: {forward: []}\n", ""))
	resp, _, err := rawExchange(t, p.public, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Values("Content-Security-Policy"); !slices.Equal(got, []string{"sandbox"}) {
		t.Errorf("Content-Security-Policy %q, want sandbox", got)
	}
	if v := resp.Header.Get("Clear-Site-Data"); v != "" {
		t.Errorf("Clear-Site-Data %q reached the browser", v)
	}
	if got := resp.Header.Values("Set-Cookie"); !slices.Equal(got, []string{"tp=1; Path=/"}) {
		t.Errorf("Set-Cookie %q, want only the third party's own", got)
	}
}

// A page on https://evil.example opened a WebSocket to the portal's route
// (olp_auth turned into a Bearer token) and read the replies. Refused 403
// now; the portal's own origin still upgrades.
func TestHostileCrossSiteWebSocketHijacking(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	ws := "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nCookie: olp_auth=a.b.c\r\n"
	for _, origin := range []string{"https://evil.example", "null", "http://a.evil.example", "https://a"} {
		resp, body, err := rawExchange(t, p.public, ws+"Origin: "+origin+"\r\n\r\n", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Origem") {
			t.Errorf("Origin %s: %d %q, want the 403 problem", origin, resp.StatusCode, body)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d foreign upgrades reached the upstream", n)
	}
	resp, _, err := rawExchange(t, p.public, ws+"Origin: http://a\r\n\r\n", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusForbidden || len(up.requests()) != 1 {
		t.Errorf("own origin: %d, upstream %d requests; want it proxied", resp.StatusCode, len(up.requests()))
	}
}

// Fresh attack pass A58: Set-Cookie2: olp_auth=… (RFC 2965, obsoleted by
// RFC 6265) passed through from a third-party upstream while every
// Set-Cookie spelling was policed. It is dropped from every response,
// final and 103 Early Hints, on session and third-party routes alike, in
// any spelling; the route's own Set-Cookie still passes.
func TestHostileSetCookie2FromAnUpstreamNeverReachesTheClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set := func() {
			w.Header()["Set-Cookie2"] = []string{"olp_auth=j; Version=1"}
			w.Header()["set_cookie2"] = []string{"olp_auth=k; Version=1"}
			w.Header()["SET-COOKIE2"] = []string{"olp_auth=l; Version=1"}
		}
		set()
		w.Header().Set("Link", "</s.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		set()
		w.Header()["Set-Cookie"] = []string{"tp=1"}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	p := startServe(t, minimalServe(srv.URL, "", `  - name: terceiro
    path_prefix: /terceiro
    upstream: "`+srv.URL+`"
    cookies: {forward: []}
`))
	for _, path := range []string{"/x", "/terceiro/x"} {
		raw := "GET " + path + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
		conn, err := net.DialTimeout("tcp", hostPort(p.public), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, raw); err != nil {
			t.Fatal(err)
		}
		all, _ := io.ReadAll(conn)
		conn.Close()
		text := strings.ToLower(string(all))
		if !strings.Contains(text, "103 early hints") || !strings.Contains(text, "200 ok") {
			t.Fatalf("%s: want a 103 and a 200:\n%s", path, all)
		}
		if strings.Contains(text, "cookie2") || strings.Contains(text, "olp_auth") {
			t.Errorf("%s: a Set-Cookie2 reached the client:\n%s", path, all)
		}
		if !strings.Contains(text, "set-cookie: tp=1") {
			t.Errorf("%s: the route's own Set-Cookie is missing:\n%s", path, all)
		}
	}
}

// Fresh attack pass 13 A01: a third-party route's upstream answered a
// plain request (no upgrade) with Sec-WebSocket-Accept and a header under
// the Sec-WebSocket- prefix that is no handshake header; both reached the
// browser (the prefix was exempt on every response). Only the handshake's
// own headers pass, and only on the 101 that answers an upgrade.
func TestHostileWebSocketHeadersOnAPlainAnswerOfAThirdPartyRoute(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
		w.Header().Set("Sec-WebSocket-Session-Registration", "(ES256)")
		w.Header().Set("Sec-WebSocket-Protocol", "chat")
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	p := startServe(t, minimalServe(srv.URL, "    cookies: {forward: []}\n", ""))
	for _, path := range []string{"/x", "/x?h=1", "/ws"} {
		resp, _, err := rawExchange(t, p.public, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d, want the upstream's 200", path, resp.StatusCode)
		}
		for k := range resp.Header {
			if strings.HasPrefix(strings.ToLower(k), "sec-") {
				t.Errorf("GET %s: %s %q reached the browser on a 200", path, k, resp.Header.Get(k))
			}
		}
	}
}
