package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/olp-edu/borda"

// The packages that declare their own typed options never import configs,
// directly or through another Borda package: cmd/borda maps the file into
// them (docs/architecture.md, "Packages"). The imports are read from the
// repository's own sources (only a Borda package can import configs).
func TestPackagesWithTypedOptionsDoNotImportConfigs(t *testing.T) {
	for _, p := range []string{"ratelimit", "identity", "cookies", "telemetry", "redisconn", "keyspace"} {
		if path, ok := importPath(t, p, modulePath+"/configs", map[string]bool{}); ok {
			t.Errorf("%s imports configs: %s", p, path)
		}
	}
}

// importPath reports whether the package in dir (relative to the module
// root) reaches target through Borda packages, and the chain that does.
func importPath(t *testing.T, dir, target string, seen map[string]bool) (string, bool) {
	t.Helper()
	if seen[dir] {
		return "", false
	}
	seen[dir] = true
	files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == target {
				return dir + " → configs", true
			}
			if rest, ok := strings.CutPrefix(path, modulePath+"/"); ok {
				if chain, ok := importPath(t, rest, target, seen); ok {
					return dir + " → " + chain, true
				}
			}
		}
	}
	return "", false
}
