package gateway

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// saneIDPattern is the documented charset and length of a kept client id
// (docs/edge.md, "Request id"), written as a regular expression apart
// from the byte table it checks.
var saneIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// TestClientRequestIDKeptOnlyInTheSafeCharset (issue 22 A56): markup and
// control characters in a client's X-Request-Id passed through to logs,
// the upstream and the response. A table of the spellings an attacker
// tries: each is kept exactly when it matches [A-Za-z0-9._:-]{1,128},
// else the request gets a fresh 32-hex id.
func TestClientRequestIDKeptOnlyInTheSafeCharset(t *testing.T) {
	t.Parallel()
	kept := []string{"abc-123", "0b7e5e0e-58a4-4b1c-9a0e-3f1c2d4e5f60", "01HZX3Q8Y7K2M4N6P8R0S2T4V6", "Root=1-5f84c7a3-abc",
		"req.42:7_x", strings.Repeat("a", 128)}
	fresh := []string{"", "<script>alert(1)</script>", `"quoted"`, "a b", "a\tb", "id\x00", "id\x7f", "id%0d%0aX-Evil:1",
		"a/b", "a,b", "a;b", `a\b`, "a'b", "a=b", "a+b", "a&b", "a>b", "id\u202eevil", "id\u200b", "ação",
		strings.Repeat("a", 129), "{{7*7}}", "${jndi:ldap://x}", "a|b", "a@b", "a#b", "a?b", "a*b"}
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	for _, v := range append(append([]string{}, kept...), fresh...) {
		if got, want := saneRequestID(v), saneIDPattern.MatchString(v); got != want {
			t.Errorf("saneRequestID(%q) = %v, the documented pattern says %v", v, got, want)
		}
		req := h.newRequest(t, http.MethodGet, "", "/")
		req.Header["X-Request-Id"] = []string{v}
		rr := h.serve(req, "203.0.113.9:5555")
		id := rr.Header().Get("X-Request-Id")
		upID := up.last(t).Header.Get("X-Request-Id")
		if id != upID {
			t.Errorf("%q: response id %q, upstream id %q", v, id, upID)
		}
		if saneIDPattern.MatchString(v) {
			if id != v {
				t.Errorf("sane %q replaced by %q", v, id)
			}
		} else if id == v || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
			t.Errorf("%q: id %q, want a fresh 32-hex id", v, id)
		}
	}
}

// FuzzRequestID: whatever a client sends, the request's id matches the
// documented pattern, and it is the client's exactly when that does.
func FuzzRequestID(f *testing.F) {
	for _, s := range []string{"abc-123", "<b>", "a b", "\x00", strings.Repeat("z", 129), "ação", "id\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		id := requestID(v)
		if !saneIDPattern.MatchString(id) {
			t.Fatalf("requestID(%q) = %q, outside the safe charset", v, id)
		}
		if (id == v) != saneIDPattern.MatchString(v) {
			t.Fatalf("requestID(%q) = %q: kept %v, pattern says %v", v, id, id == v, saneIDPattern.MatchString(v))
		}
	})
}
