package gateway

import (
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
