package e2e

// Hostile request heads against the real binary: how much a connection
// may make the gateway hold before any handler runs, and TRACE (fresh
// attack pass A21 and A41; docs/security.md, framing and resources).

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// headExchange writes head on a new connection while reading the answer
// (a server that refuses a large head answers before the client finished
// writing it and closes; the write's error is then expected, not fatal).
func headExchange(t *testing.T, base, head string) (*http.Response, error) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", hostPort(base), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	go func() { _, _ = io.WriteString(conn, head) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// TestHostileHugeRequestHeadsAreRefusedAt64KiB: with Go's default
// MaxHeaderBytes (1 MiB) one address could make 1 024 connections hold
// 1 MiB of headers each before any check (600 of them took a 256 MiB
// pod to 354 MB). Every shape of a head over the bound (one huge value,
// many small lines, a huge request line, a huge cookie) is answered 431
// and never reaches the upstream; heads a portal sends (8 KiB of cookies,
// 48 KiB in all) still pass.
func TestHostileHugeRequestHeadsAreRefusedAt64KiB(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	lines := func(n, size int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "X-A%05d: %s\r\n", i, strings.Repeat("a", size))
		}
		return b.String()
	}
	cases := []struct {
		name   string
		target string
		extra  string
		status int
	}{
		{"portal cookies 8 KiB", "/ok1", "Cookie: _ga=" + strings.Repeat("g", 8<<10) + "\r\n", 200},
		{"48 KiB of headers", "/ok2", lines(48, 1000), 200},
		{"one 70 KiB value", "/big1", "X-Big: " + strings.Repeat("b", 70<<10) + "\r\n", 431},
		{"1 040 lines of 1 000 bytes", "/big2", lines(1040, 1000), 431},
		{"a 100 KiB cookie", "/big3", "Cookie: olp_auth=" + strings.Repeat("c", 100<<10) + "\r\n", 431},
		{"a 100 KiB request target", "/big4?q=" + strings.Repeat("q", 100<<10), "", 431},
	}
	for _, c := range cases {
		resp, err := headExchange(t, p.public, "GET "+c.target+" HTTP/1.1\r\nHost: a\r\n"+c.extra+"Connection: close\r\n\r\n")
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
	}
	reached := map[string]bool{}
	for _, r := range up.requests() {
		reached[strings.SplitN(r.Path, "?", 2)[0]] = true
	}
	for _, c := range cases {
		path := strings.SplitN(c.target, "?", 2)[0]
		if want := c.status == 200; reached[path] != want {
			t.Errorf("%s: reached the upstream = %v, want %v", c.name, reached[path], want)
		}
	}
}

// TestHostileTraceIsNeverForwarded: a TRACE without Max-Forwards reached
// the upstream with the HttpOnly olp_auth cookie turned into
// Authorization: Bearer (an echoing upstream hands it back: cross-site
// tracing). Every TRACE, with any Max-Forwards or none, is 405 here.
func TestHostileTraceIsNeverForwarded(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	for _, mf := range []string{"", "Max-Forwards: 0\r\n", "Max-Forwards: 1\r\n", "Max-Forwards: 99\r\n", "Max-Forwards: x\r\n"} {
		resp, _, err := rawExchange(t, p.public, "TRACE /t HTTP/1.1\r\nHost: a\r\nCookie: olp_auth=SECRET\r\n"+mf+"Connection: close\r\n\r\n", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") == "" {
			t.Errorf("TRACE %q: status %d, Allow %q; want 405 with Allow", mf, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("TRACE reached the upstream %d times", n)
	}
}
