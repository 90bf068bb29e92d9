package egress

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestEveryOutboundClientBoundsResponseHeads (fresh attack pass A050):
// every http.Transport literal in the module's code sets
// MaxResponseHeaderBytes, every http.Client literal names its Transport,
// and nothing uses http.DefaultClient, http.DefaultTransport (outside this
// package's clone) or the package-level http.Get/Head/Post/PostForm,
// whose transport reads a 10 MB response head. Benchmarks and tests are
// exempt (they talk to their own stand-ins).
func TestEveryOutboundClientBoundsResponseHeads(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "bench", "e2e", ".git", "internal/egress", "internal/servicetest", "internal/upstashtest":
				return filepath.SkipDir
			}
			if rel != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, finding := range clientFindings(fset, f) {
			t.Error(finding)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// clientFindings are the outbound-client rules' breaches in f, one
// message each: an http.Transport literal without MaxResponseHeaderBytes,
// an http.Client literal without a Transport or without a redirect policy
// (CheckRedirect: Go's default follows ten redirects to any address), and
// any use of http.DefaultClient, http.DefaultTransport or the
// package-level http.Get/Head/Post/PostForm.
func clientFindings(fset *token.FileSet, f *ast.File) []string {
	http := httpName(f)
	if http == "" {
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CompositeLit:
			switch typeName(x.Type, http) {
			case "Transport":
				if !hasField(x, "MaxResponseHeaderBytes") {
					out = append(out, fmt.Sprintf("%s: http.Transport without MaxResponseHeaderBytes (use egress.MaxResponseHeaderBytes)", fset.Position(x.Pos())))
				}
			case "Client":
				if !hasField(x, "Transport") {
					out = append(out, fmt.Sprintf("%s: http.Client without a Transport reads 10 MB heads (use egress.Transport())", fset.Position(x.Pos())))
				}
				if !hasField(x, "CheckRedirect") {
					out = append(out, fmt.Sprintf("%s: http.Client follows redirects (build it with egress.Client)", fset.Position(x.Pos())))
				}
			}
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == http {
				switch x.Sel.Name {
				case "DefaultClient", "DefaultTransport", "Get", "Head", "Post", "PostForm":
					out = append(out, fmt.Sprintf("%s: http.%s reads 10 MB heads (use egress.Transport())", fset.Position(x.Pos()), x.Sel.Name))
				}
			}
		}
		return true
	})
	return out
}

// httpName is the name net/http is imported under in f ("" when it is not).
func httpName(f *ast.File) string {
	for _, im := range f.Imports {
		if im.Path.Value == `"net/http"` {
			if im.Name != nil {
				return im.Name.Name
			}
			return "http"
		}
	}
	return ""
}

// typeName is T for a composite literal of type pkg.T or &pkg.T.
func typeName(e ast.Expr, pkg string) string {
	if s, ok := e.(*ast.SelectorExpr); ok {
		if id, ok := s.X.(*ast.Ident); ok && id.Name == pkg {
			return s.Sel.Name
		}
	}
	return ""
}

func hasField(c *ast.CompositeLit, name string) bool {
	for _, el := range c.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if id, ok := kv.Key.(*ast.Ident); ok && id.Name == name {
				return true
			}
		}
	}
	return false
}

// TestEveryOutboundClientFollowsNoRedirect: clientFindings, the check
// TestEveryOutboundClientBoundsResponseHeads runs on every file of the
// module, refuses an http.Client literal without a CheckRedirect (Go's
// default follows ten redirects to any address: a deny-list feed or an
// Upstash endpoint that redirected sent Borda to an internal address),
// beside its other rules; run here on a file that breaks each, and not on
// the literal that keeps them.
func TestEveryOutboundClientFollowsNoRedirect(t *testing.T) {
	src := `package p
import h "net/http"
var a = &h.Client{Transport: nil}
var b = h.Client{Transport: nil, CheckRedirect: nil}
var c = &h.Transport{}
var d = h.DefaultClient
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := clientFindings(fset, f)
	want := []string{"p.go:3:10: http.Client follows redirects", "p.go:5:10: http.Transport without MaxResponseHeaderBytes", "p.go:6:9: http.DefaultClient"}
	if len(got) != len(want) {
		t.Fatalf("findings %q, want %d: %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("finding %d = %q, want it to start with %q", i, got[i], w)
		}
	}
}

// TestClientFollowsNoRedirect: a client from Client answers the 3xx
// itself, the redirect's target never called, and RedirectError names
// the target's host only.
func TestClientFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer target.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/secret-path?token=s3cr3t", code)
		}))
		for _, c := range []*http.Client{Client(nil, 0), Client(Transport(), time.Second)} {
			resp, err := c.Post(src.URL, "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatalf("%d: %v", code, err)
			}
			resp.Body.Close()
			if resp.StatusCode != code {
				t.Fatalf("status %d, want the %d itself", resp.StatusCode, code)
			}
			err = RedirectError(resp)
			if err == nil {
				t.Fatalf("%d: RedirectError is nil", code)
			}
			host := strings.TrimPrefix(target.URL, "http://")
			if msg := err.Error(); !strings.Contains(msg, host) || strings.Contains(msg, "secret-path") || strings.Contains(msg, "s3cr3t") {
				t.Fatalf("%d: %q, want the host %s and neither the path nor the query", code, msg, host)
			}
		}
		src.Close()
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect's target was called %d times", n)
	}
}

// TestRedirectErrorIsNilOutsideThree: only a 3xx is a redirect; a hostile
// Location is never printed raw.
func TestRedirectErrorIsNilOutsideThree(t *testing.T) {
	for _, code := range []int{200, 204, 299, 400, 404, 500} {
		if err := RedirectError(&http.Response{StatusCode: code, Header: http.Header{"Location": {"http://x/"}}}); err != nil {
			t.Errorf("%d: %v, want nil", code, err)
		}
	}
	for loc, want := range map[string]string{
		"":                                  "no address",
		"/relative":                         "the same host",
		"http://a\u202eb.example/":          "",
		"http://bad host/":                  "not a URL",
		"https://u:p@ok.example:8443/x?k=v": "ok.example:8443",
		"http://\xe2\x80\xaeevil/":          "",
	} {
		h := http.Header{}
		if loc != "" {
			h.Set("Location", loc)
		}
		err := RedirectError(&http.Response{StatusCode: 302, Header: h})
		if err == nil {
			t.Fatalf("%q: nil", loc)
		}
		msg := err.Error()
		for _, r := range msg {
			if r < ' ' || r >= 0x7f {
				t.Errorf("%q: %q holds an unprintable rune", loc, msg)
			}
		}
		if strings.Contains(msg, "u:p") || strings.Contains(msg, "k=v") {
			t.Errorf("%q: %q shows the user or the query", loc, msg)
		}
		if want != "" && !strings.Contains(msg, want) {
			t.Errorf("%q: %q, want it to name %q", loc, msg, want)
		}
	}
}

// TestTransportRefusesAHeadPastTheBound: a response head over
// MaxResponseHeaderBytes fails the exchange; one under it is read.
func TestTransportRefusesAHeadPastTheBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 1
		if r.URL.Query().Get("big") != "" {
			n = MaxResponseHeaderBytes / 1000
		}
		for i := range n {
			w.Header().Add("X-Pad", strings.Repeat("p", 1000)+string(rune('a'+i%26)))
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: Transport()}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("a 1 KB head: %v", err)
	}
	resp.Body.Close()
	if resp, err := c.Get(srv.URL + "?big=1"); err == nil {
		resp.Body.Close()
		t.Fatalf("a %d KB head was read (status %d), want an error", MaxResponseHeaderBytes/1024, resp.StatusCode)
	}
}
