package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Fresh attack pass 19, through the real binary: what a client can put in
// a request past the header policies.
//
//   - A51: trailers of a chunked request (X-Forwarded-For, Authorization,
//     Remote-User, an olp_auth cookie) reached the upstream after the
//     body, where an upstream that merges trailers into its headers reads
//     them as the client's identity. No request trailer is forwarded; the
//     body is, whole.
//   - A52: "GET /x?a=1#frag" reached the upstream with its fragment. A
//     target holding '#' is refused 400.
//   - A58: X-Borda-Source and X-Borda-Replay (the forwarder's own names)
//     reached the upstream. The gateway's namespace is dropped from every
//     client, in any spelling.
func TestHostileRequestCarriesFieldsPastTheHeaderPolicies(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	trailers := "X-Forwarded-For: 198.51.100.7\r\nAuthorization: Bearer stolen\r\nRemote-User: admin\r\nCookie: olp_auth=x\r\n"
	raw := "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-Forwarded-For, Authorization, Remote-User, Cookie\r\n" +
		"X-Borda-Source: evolution\r\nx_borda_replay: 1\r\nX-BORDA-REPLAY-FORCE: 1\r\nConnection: close\r\n\r\n" +
		"4\r\nbody\r\n0\r\n" + trailers + "\r\n"
	resp, _, err := rawExchange(t, p.public, raw, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a chunked request with trailers: status %d", resp.StatusCode)
	}
	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("the upstream got %d requests, want 1", len(seen))
	}
	got := seen[0]
	if len(got.Trailer) != 0 || got.Header.Get("Trailer") != "" {
		t.Errorf("the upstream got request trailers %v (Trailer: %q)", got.Trailer, got.Header.Get("Trailer"))
	}
	if got.Body != "body" {
		t.Errorf("the upstream got body %q, want %q", got.Body, "body")
	}
	for k := range got.Header {
		if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(k, "_", "-")), "x-borda-") {
			t.Errorf("the client's %s reached the upstream", k)
		}
	}
	for _, target := range []string{"/x?a=1#frag", "/x#frag"} {
		resp, _, err := rawExchange(t, p.public, "GET "+target+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: status %d, want 400", target, resp.StatusCode)
		}
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("a target with a fragment reached the upstream (%d requests)", n)
	}
}
