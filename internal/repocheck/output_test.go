package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Library code speaks through the structured log only, and is configured
// through configs only: a debug print left in ratelimit/sync_replay.go
// (fresh attack pass 18 R13) wrote unstructured lines to stdout when an
// environment variable named DBG was set. Outside the commands (cmd/,
// bench/), the test helpers (internal/servicetest, internal/brokernode)
// and tests, no Go file calls fmt.Print*, fmt.Fprint* to os.Stdout or
// os.Stderr, print or println, or reads the environment (os.Getenv,
// os.LookupEnv, os.Environ) except configs, which reads it for the
// config's ${VAR} references.
func TestLibraryCodeNeitherPrintsNorReadsTheEnvironment(t *testing.T) {
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	allowed := func(rel string) (print, env bool) {
		top := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
		dir := filepath.ToSlash(filepath.Dir(rel))
		switch {
		case top == "cmd" || top == "bench" || top == "scripts":
			return true, true
		case dir == "internal/servicetest" || dir == "internal/brokernode":
			return false, true
		case top == "configs":
			return false, true
		}
		return false, false
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		okPrint, okEnv := allowed(rel)
		if okPrint && okEnv {
			return nil
		}
		files++
		for _, bad := range printsAndEnv(t, path, okPrint, okEnv) {
			t.Errorf("%s: %s", rel, bad)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("checked %d library files, want the whole module's", files)
	}
}

// printsAndEnv lists the calls of path that print outside the log (unless
// okPrint) or read the environment (unless okEnv), with their lines.
func printsAndEnv(t *testing.T, path string, okPrint, okEnv bool) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		name := ""
		switch fn := call.Fun.(type) {
		case *ast.Ident:
			if fn.Name == "print" || fn.Name == "println" {
				name = fn.Name
			}
		case *ast.SelectorExpr:
			if pkg, ok := fn.X.(*ast.Ident); ok {
				name = pkg.Name + "." + fn.Sel.Name
			}
		}
		line := fset.Position(call.Pos()).Line
		switch {
		case !okPrint && (name == "print" || name == "println" || strings.HasPrefix(name, "fmt.Print")):
			out = append(out, name+" at line "+strconv.Itoa(line)+": print through the logger")
		case !okPrint && strings.HasPrefix(name, "fmt.Fprint") && len(call.Args) > 0 && isStdStream(call.Args[0]):
			out = append(out, name+" to a standard stream at line "+strconv.Itoa(line)+": print through the logger")
		case !okEnv && (name == "os.Getenv" || name == "os.LookupEnv" || name == "os.Environ"):
			out = append(out, name+" at line "+strconv.Itoa(line)+": take a setting through configs")
		}
		return true
	})
	return out
}

// isStdStream reports whether e is os.Stdout or os.Stderr.
func isStdStream(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "os" && (sel.Sel.Name == "Stdout" || sel.Sel.Name == "Stderr")
}
