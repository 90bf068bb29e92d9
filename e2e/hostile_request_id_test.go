package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHostileRequestIDCarriesMarkupToLogsAndUpstreams (issue 22 A56):
// a client's X-Request-Id with markup or control characters reached the
// access log, the upstream and the response as written. Through the real
// binary: only an id of [A-Za-z0-9._:-]{1,128} is kept; any other gets a
// fresh one, and the client's text appears nowhere.
func TestHostileRequestIDCarriesMarkupToLogsAndUpstreams(t *testing.T) {
	up := recordingUpstream(t)
	p := startServe(t, minimalServe(up.URL, "", ""))
	fresh := regexp.MustCompile(`^[0-9a-f]{32}$`)
	hostile := []string{"<img src=x onerror=alert(1)>", `"};alert(1);//`, "x%0d%0aSet-Cookie:a=b",
		"a/../../b", "id\u202egnp.exe", strings.Repeat("k", 129)}
	for i, v := range hostile {
		resp, _, err := rawExchange(t, p.public, "GET /r HTTP/1.1\r\nHost: a\r\nX-Request-Id: "+v+"\r\nConnection: close\r\n\r\n", 5*time.Second)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: status %d", v, resp.StatusCode)
		}
		id := resp.Header.Get("X-Request-Id")
		if !fresh.MatchString(id) {
			t.Errorf("%q: response X-Request-Id %q, want a fresh id", v, id)
		}
		seen := up.requests()
		if len(seen) != i+1 || seen[i].Header.Get("X-Request-Id") != id {
			t.Errorf("%q: upstream got %q, want the fresh %q", v, seen[len(seen)-1].Header.Get("X-Request-Id"), id)
		}
	}
	logs := p.logs.String()
	for _, v := range hostile {
		if strings.Contains(logs, v) || strings.Contains(logs, strings.ReplaceAll(v, `"`, `\"`)) {
			t.Errorf("the access log holds the client's id %q", v)
		}
	}
}

// TestHostileUntrustedClientChoosesItsRequestID (fresh attack pass 2,
// A50): a client's own X-Request-Id, when sane, was adopted from any peer,
// so a client could copy another request's id and merge log trails.
// Through the real binary: from a peer outside trusted_proxies the id is
// replaced by a fresh one on the response, the upstream and the access
// log (Envoy's edge default); behind a trusted proxy it is kept.
func TestHostileUntrustedClientChoosesItsRequestID(t *testing.T) {
	fresh := regexp.MustCompile(`^[0-9a-f]{32}$`)
	const chosen = "4b289147c715dead"
	for _, tc := range []struct {
		top  string
		keep bool
	}{{"", false}, {"trusted_proxies: [\"127.0.0.1/32\"]\n", true}} {
		up := recordingUpstream(t)
		p := startServe(t, minimalServe(up.URL, "", tc.top))
		resp, _, err := rawExchange(t, p.public, "GET /r HTTP/1.1\r\nHost: a\r\nX-Request-Id: "+chosen+"\r\nConnection: close\r\n\r\n", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Header.Get("X-Request-Id")
		if seen := up.requests(); len(seen) != 1 || seen[0].Header.Get("X-Request-Id") != id {
			t.Errorf("trusted %v: the upstream did not get the response's id %q", tc.keep, id)
		}
		if tc.keep && id != chosen {
			t.Errorf("behind a trusted proxy the id %q was replaced by %q", chosen, id)
		}
		if !tc.keep && (id == chosen || !fresh.MatchString(id)) {
			t.Errorf("from an untrusted peer: id %q, want a fresh one", id)
		}
		if !tc.keep {
			p.stop(t)
			if strings.Contains(p.logs.String(), chosen) {
				t.Errorf("the access log holds the client's chosen id")
			}
		}
	}
}
