package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// An upstream that sends 103 Early Hints before its answer made the final
// response lose every header the gateway had set before proxying:
// ReverseProxy relays a 1xx by copying its headers into the response's
// map, writing it, and clearing the map. So the final 200 went out without
// X-Request-Id, without the CORS headers (a browser then refuses the
// answer) and without the rate-limit headers; and the 103 carried the
// upstream's own X-Request-Id beside the gateway's. The gateway's headers
// must reach the final response, and the 103 carries only its id.
func TestHostileEarlyHintsDropTheGatewaysHeadersFromTheFinalResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.Header().Set("X-Request-Id", "upstream-own-id")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Del("X-Request-Id")
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	// The client's id is kept from a trusted proxy only (fresh attack pass 2 A50).
	top := `trusted_proxies: ["127.0.0.1/32"]
cors:
  policies:
    portal: {allowed_origins: ["https://app.example.com"], allow_credentials: true}
`
	p := startServe(t, minimalServe(srv.URL, "    cors: portal\n", top))
	conn, err := net.DialTimeout("tcp", hostPort(p.public), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET /x HTTP/1.1\r\nHost: a\r\nOrigin: https://app.example.com\r\nX-Request-Id: client-id-7\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	early, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if early.StatusCode != http.StatusEarlyHints || early.Header.Get("Link") == "" {
		t.Fatalf("first response %d %v, want the relayed 103 with its Link", early.StatusCode, early.Header)
	}
	if got := early.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "client-id-7" {
		t.Errorf("103 X-Request-Id %q, want only the gateway's [client-id-7]", got)
	}
	final, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(final.Body)
	if final.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("final %d %q, want 200 ok", final.StatusCode, body)
	}
	if got := final.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "client-id-7" {
		t.Errorf("final X-Request-Id %q, want [client-id-7]", got)
	}
	if got := final.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example.com" {
		t.Errorf("final Access-Control-Allow-Origin %q, want the allowed origin (headers: %v)", got, final.Header)
	}
	if !strings.Contains(strings.Join(final.Header.Values("Vary"), ","), "Origin") {
		t.Errorf("final Vary %q lacks Origin", final.Header.Values("Vary"))
	}
}

// TestHostileEarlyHintsCarryClearSiteDataFromAnUntrustedRoute (issue 22
// A54): the response-header policy of a route that does not forward the
// session (no Clear-Site-Data, no Service-Worker-Allowed) and of a CORS
// route (the edge's CORS headers only) was applied to the final answer
// but not to a relayed 1xx: a 103 carried Clear-Site-Data: "cookies"
// past it. Every relayed 1xx gets the final answer's policy; a session
// route's 103 keeps them (the portal may clear its own site).
func TestHostileEarlyHintsCarryClearSiteDataFromAnUntrustedRoute(t *testing.T) {
	hostile := map[string]string{
		"Clear-Site-Data":                  `"cookies", "storage"`,
		"Service-Worker-Allowed":           "/",
		"Set-Cookie":                       "olp_auth=evil; Path=/",
		"X-Request-Id":                     "upstream-own-id",
		"X-Ratelimit-Would-Block":          "true",
		"Access-Control-Allow-Origin":      "https://evil.example",
		"Access-Control-Allow-Credentials": "TRUE", // the gateway's own is "true"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		for k, v := range hostile {
			w.Header().Set(k, v)
		}
		w.WriteHeader(http.StatusEarlyHints)
		for k := range hostile {
			w.Header().Del(k)
		}
		w.Header().Del("Link")
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	// The first route (path_prefix /) forwards the session: its 103 keeps
	// Clear-Site-Data; terceiro forwards none.
	p := startServe(t, minimalServe(srv.URL, "", `  - name: terceiro
    path_prefix: /terceiro
    upstream: "`+srv.URL+`"
    cookies: {forward: []}
    cors: portal
cors:
  policies:
    portal: {allowed_origins: ["https://app.example.com"], allow_credentials: true}
`))
	early := func(path string) *http.Response {
		t.Helper()
		conn, err := net.DialTimeout("tcp", hostPort(p.public), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: a\r\nOrigin: https://app.example.com\r\nX-Request-Id: client-id-8\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusEarlyHints || res.Header.Get("Link") == "" {
			t.Fatalf("%s: first response %d %v, want the relayed 103 with its Link", path, res.StatusCode, res.Header)
		}
		final, err := http.ReadResponse(br, nil)
		if err != nil || final.StatusCode != 200 {
			t.Fatalf("%s: final response %v %v", path, final, err)
		}
		return res
	}
	res := early("/terceiro/x")
	for k := range hostile {
		for _, v := range res.Header.Values(k) {
			if v == hostile[k] {
				t.Errorf("untrusted route's 103 carried the upstream's %s: %q", k, v)
			}
		}
	}
	// The client is no trusted proxy: the gateway's id is a fresh one (fresh attack pass 2 A50).
	if got := res.Header.Values("X-Request-Id"); len(got) != 1 || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(got[0]) {
		t.Errorf("103 X-Request-Id %q, want only the gateway's", got)
	}
	res = early("/x")
	if got := res.Header.Get("Clear-Site-Data"); got != hostile["Clear-Site-Data"] {
		t.Errorf("session route's 103 Clear-Site-Data %q, want the upstream's kept", got)
	}
	if got := res.Header.Get("Set-Cookie"); got != "" {
		t.Errorf("session route's 103 carried Set-Cookie %q (no 1xx passes the cookie policy)", got)
	}
}
