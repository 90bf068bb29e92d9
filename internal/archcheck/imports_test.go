package archcheck

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is Borda's module path.
const module = "github.com/olp-edu/borda"

// configsReaders are the only packages that may import configs: configs
// itself and the command that maps the validated file into each
// package's options (docs/architecture.md, "The import rule").
var configsReaders = []string{module + "/configs", module + "/cmd/borda"}

// imports returns, for every package of the module (tests excluded), its
// direct imports, as `go list` reports them.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	return goList(t, "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}")
}

// testImports returns, for every package of the module, what its tests
// import: TestImports (package p tests) and XTestImports (package p_test).
func testImports(t *testing.T) map[string][]string {
	t.Helper()
	return goList(t, "{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}")
}

// goList runs go list -f format over the module: the first word of each
// line is the package, the rest its values.
func goList(t *testing.T, format string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", format, "./...")
	cmd.Dir = "../.." // the module root, seen from this package's directory
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			pkgs[f[0]] = f[1:]
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages:\n%s", len(pkgs), out)
	}
	return pkgs
}

// TestOnlyCmdImportsConfigs: configs is a leaf that only cmd/borda
// reads; every other package declares the typed options it needs and is
// built from them, so it can be read, tested and reused without the
// configuration tree, and a configuration change recompiles only configs
// and cmd/borda. Since cmd/borda is a main package nothing can import,
// the direct-import rule also keeps configs out of every other package's
// dependencies (`go list -deps`).
func TestOnlyCmdImportsConfigs(t *testing.T) {
	pkgs := imports(t)
	configs := module + "/configs"
	for pkg, imps := range pkgs {
		if !slices.Contains(imps, configs) || slices.Contains(configsReaders, pkg) {
			continue
		}
		t.Errorf("%s imports configs: declare typed options in the package and map them in cmd/borda", pkg)
	}
}

// TestNothingImportsCmd: the commands are the top of the graph.
func TestNothingImportsCmd(t *testing.T) {
	for pkg, imps := range imports(t) {
		for _, imp := range imps {
			if strings.HasPrefix(imp, module+"/cmd/") {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
}
