package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Set-Cookie and Clear-Site-Data sent as response trailers were relayed
// past the response-header policy (attack pass A02): a route that forwards
// no session could set the portal's cookies for any client that merges
// trailers into headers. Every policed, framing, routing, authentication,
// cookie, caching and security-policy trailer is dropped on every route,
// announced or not, in any case or '_' spelling; grpc-status,
// Server-Timing and application trailers pass.
func TestForbiddenTrailersNeverReachTheClient(t *testing.T) {
	t.Parallel()
	forbidden := []string{"Set-Cookie", "set-cookie", "SET-COOKIE", "Set_Cookie", "Clear-Site-Data", "Www-Authenticate",
		"Location", "Content-Length", "Transfer-Encoding", "Content-Type", "Content-Security-Policy", "Strict-Transport-Security",
		"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Cross-Origin-Opener-Policy", "X-Request-Id",
		"X-Ratelimit-Remaining", "X-RateLimit-Would-Block", "Ratelimit", "Cache-Control", "Vary", "Refresh", "Authorization",
		"Proxy-Authenticate", "Service-Worker-Allowed", "Link", "Alt-Svc", "Via", "Trailer", "Connection", "Upgrade"}
	allowed := []string{"Grpc-Status", "Grpc-Message", "Server-Timing", "Content-Digest", "X-Checksum"}
	up := newRecordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		// Announce half of each list, send the rest unannounced. Names Go's
		// transport refuses to see announced (it answers 502 then) go
		// unannounced.
		var announce []string
		for i, k := range append(append([]string{}, forbidden...), allowed...) {
			if i%2 == 0 && !goRefusesAnnounced[http.CanonicalHeaderKey(k)] {
				announce = append(announce, k)
			}
		}
		w.Header().Set("Trailer", strings.Join(announce, ", "))
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		for i, k := range append(append([]string{}, forbidden...), allowed...) {
			if i%2 == 0 && !goRefusesAnnounced[http.CanonicalHeaderKey(k)] {
				w.Header().Set(k, "olp_auth=evil")
			} else {
				w.Header()[http.TrailerPrefix+k] = []string{"olp_auth=evil"}
			}
		}
	})
	h := newHarness(t, untrustedOptions(t, up.URL))
	for _, path := range []string{"/mapas/x", "/portal"} {
		req, _ := http.NewRequest(http.MethodGet, h.front.URL+path, nil)
		req.Host = "portal.example.org"
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		for k := range res.Trailer {
			if forbiddenTrailer(k) {
				t.Errorf("%s: trailer %s reached the client", path, k)
			}
		}
		for _, k := range res.Header.Values("Trailer") {
			for _, name := range strings.Split(k, ",") {
				if forbiddenTrailer(strings.TrimSpace(name)) {
					t.Errorf("%s: trailer %s announced", path, name)
				}
			}
		}
		for _, k := range allowed {
			if res.Trailer.Get(k) == "" {
				t.Errorf("%s: allowed trailer %s dropped", path, k)
			}
		}
	}
	for _, k := range forbidden {
		if !forbiddenTrailer(k) {
			t.Errorf("forbiddenTrailer(%q) = false", k)
		}
	}
}

// goRefusesAnnounced are the names net/http's transport refuses in a
// response's Trailer header (its badTrailer list).
var goRefusesAnnounced = map[string]bool{
	"Authorization": true, "Cache-Control": true, "Connection": true, "Content-Encoding": true, "Content-Length": true,
	"Content-Range": true, "Content-Type": true, "Expect": true, "Host": true, "Keep-Alive": true, "Max-Forwards": true,
	"Pragma": true, "Proxy-Authenticate": true, "Proxy-Authorization": true, "Proxy-Connection": true, "Range": true,
	"Realm": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Www-Authenticate": true,
}
