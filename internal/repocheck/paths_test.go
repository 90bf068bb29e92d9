package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// productSide is the name of the directory of shared cases and contracts
// that sits beside the repository on the developers' machines and in CI,
// and never beside a user's clone. No test may name it; this package only
// spells it to check that rule, and reads nothing from it.
const productSide = "shared"

// moduleRoot is the repository's root, seen from this package's directory
// (go test runs a test in its package's directory).
const moduleRoot = "../.."

// A test that reads a path outside the repository passes only where that
// path happens to exist: e2e read its payloads from the product side's
// directory beside the clone (productSide), so a fresh
// clone failed its own tests (issue 16 §3). Every relative path a
// *_test.go spells (a string literal starting with "../", or a
// filepath.Join / path.Join of string literals) must resolve inside the
// module root, and no test may name the product side's directory.
func TestNoTestReadsOutsideTheRepository(t *testing.T) {
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s has no go.mod: %v", root, err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || filepath.Base(filepath.Dir(path)) == "repocheck" {
			return nil // this package's fixtures spell escaping paths on purpose
		}
		files++
		for _, p := range escapingPaths(t, root, path) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s: %s", rel, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("found only %d test files under %s", files, root)
	}
}

// escapingPaths returns a description of every path in file that leaves
// root or names the product side's directory.
func escapingPaths(t *testing.T, root, file string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", file, err)
	}
	dir := filepath.Dir(file)
	var out []string
	check := func(pos token.Pos, p string) {
		if strings.Contains(p, "../"+productSide) || strings.Contains(p, productSide+"/cases") {
			out = append(out, fset.Position(pos).String()+": names the product side's directory: "+strconv.Quote(p))
			return
		}
		if !strings.HasPrefix(p, "../") && p != ".." {
			return
		}
		abs := filepath.Join(dir, p)
		if abs != root && !strings.HasPrefix(abs, root+string(filepath.Separator)) {
			out = append(out, fset.Position(pos).String()+": "+strconv.Quote(p)+" resolves outside the repository ("+abs+")")
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if joined, ok := literalJoin(n); ok {
				check(n.Pos(), joined)
				return false
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				if s, err := strconv.Unquote(n.Value); err == nil {
					check(n.Pos(), s)
				}
			}
		}
		return true
	})
	return out
}

// literalJoin returns filepath.Join(...) or path.Join(...) of string
// literals as one slash path.
func literalJoin(c *ast.CallExpr) (string, bool) {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Join" || len(c.Args) == 0 {
		return "", false
	}
	if x, ok := sel.X.(*ast.Ident); !ok || (x.Name != "filepath" && x.Name != "path") {
		return "", false
	}
	parts := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		lit, ok := a.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return "", false
		}
		parts = append(parts, s)
	}
	return filepath.ToSlash(filepath.Join(parts...)), true
}

// The check itself must catch what broke the fresh clone.
func TestEscapingPathsCatchesWhatBrokeAFreshClone(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "repo")
	pkg := filepath.Join(root, "e2e")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	src := `package e2e
const payloads = "../../` + productSide + `/cases/payloads/"
var a = "../webhook/testdata/x.json"
var b = "../../elsewhere/x"
var c = filepath.Join("..", "..", "outside")
var d = filepath.Join("..", "cmd", "borda")
var e = "/api/..%2Fx"
`
	file := filepath.Join(pkg, "x_test.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got := escapingPaths(t, root, file)
	if len(got) != 3 {
		t.Fatalf("found %d escaping paths, want 3 (the product side, ../../elsewhere, Join(.., .., outside)):\n%s", len(got), strings.Join(got, "\n"))
	}
}
