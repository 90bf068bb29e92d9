package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// A route whose upstream is the gateway again is cut at the second pass:
// only this process's own pseudonym counts, in any Via line, and another
// gateway's entry (borda behind borda) does not.
func TestLoopedSeesOnlyThisProcessInVia(t *testing.T) {
	t.Parallel()
	s := &Server{via: newViaPseudonym()}
	other := newViaPseudonym()
	if !strings.HasPrefix(s.via, "borda-") || len(s.via) != len("borda-")+16 || s.via == other {
		t.Fatalf("pseudonyms %q %q", s.via, other)
	}
	for _, tc := range []struct {
		via  []string
		want bool
	}{
		{nil, false},
		{[]string{"1.1 " + other}, false},
		{[]string{"1.1 proxy, 1.1 " + s.via}, true},
		{[]string{"1.0 cdn", "2 " + s.via}, true},
	} {
		if got := s.looped(http.Header{"Via": tc.via}); got != tc.want {
			t.Errorf("looped(Via %q) = %v, want %v", tc.via, got, tc.want)
		}
	}
	if v := viaVersion(&http.Request{ProtoMajor: 1, ProtoMinor: 1}); v != "1.1" {
		t.Errorf("viaVersion(HTTP/1.1) = %q", v)
	}
	if v := viaVersion(&http.Request{ProtoMajor: 2}); v != "2" {
		t.Errorf("viaVersion(HTTP/2) = %q", v)
	}
}

// TestResponseViaNamesTheUpstreamsProtocol: the Via entry added to an
// upstream's response carries the version the response came in ("1.0"
// from an HTTP/1.0 upstream, RFC 9110 §7.6.3), after the upstream's own.
func TestResponseViaNamesTheUpstreamsProtocol(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\nVia: 1.0 legacy\r\nContent-Length: 2\r\n\r\nok")
			}()
		}
	}()
	h := newHarness(t, routes(testRoute(t, "api", "http://"+ln.Addr().String())))
	res := h.do(t, h.newRequest(t, http.MethodGet, "", "/"))
	via := res.Header.Values("Via")
	want := "1.0 " + h.srv.via
	if res.StatusCode != 200 || len(via) != 2 || via[0] != "1.0 legacy" || via[1] != want {
		t.Fatalf("status %d, Via %q; want 200 and [\"1.0 legacy\" %q]", res.StatusCode, via, want)
	}
}
