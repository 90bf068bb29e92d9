package gateway

import (
	"io"
	"net/http"
	"testing"
)

func TestProxyBasic(t *testing.T) {
	t.Parallel()
	up := newRecordingUpstream(t, nil)
	h := newHarness(t, routes(testRoute(t, "api", up.URL)))
	res := h.do(t, h.newRequest(t, http.MethodGet, "", "/hello?x=1"))
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q", res.StatusCode, body)
	}
	if got := up.last(t).RequestURI; got != "/hello?x=1" {
		t.Errorf("upstream RequestURI = %q, want /hello?x=1", got)
	}
	if res.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on the response")
	}
}
