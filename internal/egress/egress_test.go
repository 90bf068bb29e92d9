package egress

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
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
		http := httpName(f)
		if http == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				switch typeName(x.Type, http) {
				case "Transport":
					if !hasField(x, "MaxResponseHeaderBytes") {
						t.Errorf("%s: http.Transport without MaxResponseHeaderBytes (use egress.MaxResponseHeaderBytes)", fset.Position(x.Pos()))
					}
				case "Client":
					if !hasField(x, "Transport") {
						t.Errorf("%s: http.Client without a Transport reads 10 MB heads (use egress.Transport())", fset.Position(x.Pos()))
					}
				}
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == http {
					switch x.Sel.Name {
					case "DefaultClient", "DefaultTransport", "Get", "Head", "Post", "PostForm":
						t.Errorf("%s: http.%s reads 10 MB heads (use egress.Transport())", fset.Position(x.Pos()), x.Sel.Name)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
