package keyspace_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// keyLiteral matches string literals that spell a Borda key namespace: an
// environment prefix, or one of the key families keyspace builds.
var keyLiteral = regexp.MustCompile(`(^|[^a-z])olp(-stg|-dev)?:|^(rl|cfg:relax|m|lock|wh:fwd2?):`)

// TestNoRedisKeyIsBuiltOutsideKeyspace is the seed's CI lint against prefix
// leaks: no non-test Go file outside keyspace/ and configs/ (where the
// environment prefixes are defined) may spell a key prefix or key family.
// Build keys with keyspace.Keyspace instead.
func TestNoRedisKeyIsBuiltOutsideKeyspace(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "keyspace", "configs", "testdata", ".git", "vendor", "bench", "internal":
				if path != root {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && keyLiteral.MatchString(s) {
				t.Errorf("%s: string %q looks like a Redis key; build keys with keyspace.Keyspace", fset.Position(lit.Pos()), s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
