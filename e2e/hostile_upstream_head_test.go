package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// A hostile upstream's 9 MB response head was buffered and relayed whole
// (Go's default MaxResponseHeaderBytes is 10 MB): 60 such responses to
// clients that did not read pinned 600 MB-1.1 GB (fresh attack pass
// A050). Every head past 64 KiB, in any shape (one long value, many
// lines, one huge Set-Cookie), is now a 502 that relays nothing of it;
// a head under the bound passes.
func TestHostileUpstreamHugeResponseHeadIsRefused(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kb, _ := strconv.Atoi(r.URL.Query().Get("kb"))
		switch r.URL.Query().Get("shape") {
		case "one":
			w.Header().Set("X-Big", strings.Repeat("v", kb<<10))
		case "cookie":
			w.Header().Set("Set-Cookie", "tile="+strings.Repeat("c", kb<<10))
		default:
			for i := range kb {
				w.Header().Add("X-Line-"+strconv.Itoa(i), strings.Repeat("l", 1000))
			}
		}
		io.WriteString(w, "tile")
	}))
	t.Cleanup(up.Close)
	p := startServe(t, minimalServe(up.URL, "    cookies: {forward: []}\n", ""))
	for _, shape := range []string{"one", "lines", "cookie"} {
		for _, tc := range []struct {
			kb   int
			want int
		}{{8, 200}, {48, 200}, {80, 502}, {9000, 502}} {
			resp := get(t, p.public+"/tile?shape="+shape+"&kb="+strconv.Itoa(tc.kb), "")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s head of %d KB: %d, want %d", shape, tc.kb, resp.StatusCode, tc.want)
			}
			if tc.want == 502 && (resp.Header.Get("X-Big") != "" || len(resp.Header.Values("X-Line-0")) > 0 || strings.Contains(string(body), "tile")) {
				t.Errorf("%s head of %d KB: the refused head or body was relayed", shape, tc.kb)
			}
		}
	}
}
