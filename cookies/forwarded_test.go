package cookies

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"testing"
)

// ForwardedHeader is ReverseProxy's own hop-by-hop removal for every
// Connection spelling: each case runs through a real
// httputil.ReverseProxy and the headers the upstream got (less the ones
// ReverseProxy always sets or drops) must be the view's (fresh attack
// pass 3 C13). The look-alikes ("Coo\u212aie" with the Kelvin sign, a
// padded or ';'-suffixed name) name nothing, where a strings.EqualFold
// reading took "Coo\u212aie" for Cookie.
func TestForwardedHeaderIsWhatReverseProxyForwards(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }}
	ignore := []string{"Accept-Encoding", "User-Agent", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Connection", "Keep-Alive", "Te", "Upgrade"}
	base := func() http.Header {
		return http.Header{
			"Authorization": {"Bearer a"}, "Cookie": {"olp_auth=b"}, "Content-Type": {"text/plain"},
			"Content-Encoding": {"gzip"}, "X-Other": {"1"},
		}
	}
	for _, conn := range [][]string{
		{"Content-Type"}, {"content-type"}, {"CONTENT-TYPE"}, {"close, Content-Type"}, {"Content-Type,close"},
		{" , Content-Type ,, "}, {"\tcontent-encoding\t"}, {"close", "Cookie"}, {"authorization, COOKIE, Content-Type, content-encoding"},
		{"Coo\u212aie"}, {"Content-Type;x"}, {"Content-Typo"}, {"Content_Type"}, {"x-other\r"}, {"Connection, Content-Type"},
		{"Authorization\v"}, {"ContentType"}, {""}, {","},
	} {
		in := base()
		in["Connection"] = conn
		want := ForwardedHeader(in)
		req := httptest.NewRequest("POST", "http://gw/x", nil)
		req.Header = in.Clone()
		rp.ServeHTTP(httptest.NewRecorder(), req)
		h := <-got
		for _, k := range ignore {
			delete(h, k)
			want = want.Clone()
			delete(want, k)
		}
		delete(h, "Content-Length")
		if !reflect.DeepEqual(h, want) {
			t.Errorf("Connection %q: ReverseProxy forwarded %q, ForwardedHeader %q", conn, h, want)
		}
		if !reflect.DeepEqual(in["Connection"], conn) || len(in) != 6 {
			t.Errorf("Connection %q: ForwardedHeader modified its argument", conn)
		}
	}
}
