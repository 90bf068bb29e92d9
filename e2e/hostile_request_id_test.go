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
	resp, _, err := rawExchange(t, p.public, "GET /r HTTP/1.1\r\nHost: a\r\nX-Request-Id: 1-5f84c7a3.abc_9:z\r\nConnection: close\r\n\r\n", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("X-Request-Id"); got != "1-5f84c7a3.abc_9:z" {
		t.Errorf("sane X-Request-Id replaced by %q", got)
	}
	logs := p.logs.String()
	for _, v := range hostile {
		if strings.Contains(logs, v) || strings.Contains(logs, strings.ReplaceAll(v, `"`, `\"`)) {
			t.Errorf("the access log holds the client's id %q", v)
		}
	}
}
