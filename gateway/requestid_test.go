package gateway

import (
	"net/http"
	"net/netip"
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
// tries, from a trusted proxy: each is kept exactly when it matches
// [A-Za-z0-9._:-]{1,128}, else the request gets a fresh 32-hex id.
func TestClientRequestIDKeptOnlyInTheSafeCharset(t *testing.T) {
	t.Parallel()
	kept := []string{"abc-123", "0b7e5e0e-58a4-4b1c-9a0e-3f1c2d4e5f60", "01HZX3Q8Y7K2M4N6P8R0S2T4V6", "Root=1-5f84c7a3-abc",
		"req.42:7_x", strings.Repeat("a", 128)}
	fresh := []string{"", "<script>alert(1)</script>", `"quoted"`, "a b", "a\tb", "id\x00", "id\x7f", "id%0d%0aX-Evil:1",
		"a/b", "a,b", "a;b", `a\b`, "a'b", "a=b", "a+b", "a&b", "a>b", "id\u202eevil", "id\u200b", "ação",
		strings.Repeat("a", 129), "{{7*7}}", "${jndi:ldap://x}", "a|b", "a@b", "a#b", "a?b", "a*b"}
	up := newRecordingUpstream(t, nil)
	opts := routes(testRoute(t, "api", up.URL))
	opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	h := newHarness(t, opts)
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

// TestUntrustedPeersRequestIDIsReplaced (fresh attack pass 2 A50): a
// client's own X-Request-Id was adopted from any peer, so a client could
// copy another request's id into its own and merge log trails. As Envoy
// does for edge requests (preserve_external_request_id: false), an id
// from a peer outside trusted_proxies is replaced by a fresh one, on the
// response, the upstream and the access log alike; the same id from a
// trusted proxy is kept.
func TestUntrustedPeersRequestIDIsReplaced(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	opts := routes(testRoute(t, "api", up.URL))
	opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	h := newHarness(t, opts)
	fresh := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, tc := range []struct {
		peer string
		keep bool
	}{
		{"203.0.113.9:5555", false}, {"[2001:db9::1]:5555", false}, {"127.0.0.1:5555", false}, {"11.0.0.1:1", false},
		{"10.1.2.3:5555", true}, {"[2001:db8::7]:5555", true},
	} {
		for _, v := range []string{"4b289147c715dead", "abc-123", strings.Repeat("f", 32)} {
			req := h.newRequest(t, http.MethodGet, "", "/")
			req.Header["X-Request-Id"] = []string{v}
			rr := h.serve(req, tc.peer)
			id := rr.Header().Get("X-Request-Id")
			if upID := up.last(t).Header.Get("X-Request-Id"); upID != id {
				t.Errorf("%s %q: response id %q, upstream id %q", tc.peer, v, id, upID)
			}
			switch {
			case tc.keep && id != v:
				t.Errorf("trusted %s: %q replaced by %q", tc.peer, v, id)
			case !tc.keep && (id == v || !fresh.MatchString(id)):
				t.Errorf("untrusted %s: id %q, want a fresh 32-hex id instead of %q", tc.peer, id, v)
			}
		}
	}
}
