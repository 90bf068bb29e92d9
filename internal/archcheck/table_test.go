package archcheck

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// allowList reads the package table of docs/architecture.md ("## Packages":
// | Package | Owns | May import (within Borda) |) into package → the Borda
// packages it may import. "everything" is nil with ok true for the
// package; "—" is no Borda import at all. A row naming several packages
// (`a`, `b`) gives each the same list.
func allowList(t *testing.T) (allowed map[string][]string, everything map[string]bool) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "| Package | Owns | May import (within Borda) |")
	if !ok {
		t.Fatal("docs/architecture.md: the package table (| Package | Owns | May import (within Borda) |) is gone")
	}
	code := regexp.MustCompile("`([a-z0-9/.]+)`")
	allowed, everything = map[string][]string{}, map[string]bool{}
	for _, line := range strings.Split(after, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Fatalf("docs/architecture.md: package table row without three cells: %s", line)
		}
		var imps []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			imps = append(imps, module+"/"+m[1])
		}
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			p := module + "/" + m[1]
			if strings.TrimSpace(cells[2]) == "everything" || strings.Contains(cells[2], "the packages they exercise") {
				everything[p] = true
			}
			allowed[p] = imps
		}
	}
	if len(allowed) < 10 {
		t.Fatalf("docs/architecture.md: package table has only %d packages", len(allowed))
	}
	return allowed, everything
}

// TestImportsFollowThePackageTable: the package table of
// docs/architecture.md is the allow-list. Every package of the module has
// a row, and imports (production code) only the Borda packages its row
// names, so the table cannot drift from the code.
func TestImportsFollowThePackageTable(t *testing.T) {
	allowed, everything := allowList(t)
	pkgs := imports(t)
	for pkg, imps := range pkgs {
		may, ok := rowOf(allowed, pkg)
		if !ok {
			t.Errorf("%s has no row in the package table of docs/architecture.md", pkg)
			continue
		}
		if _, all := rowOf(everything, pkg); all {
			continue
		}
		for _, imp := range imps {
			if strings.HasPrefix(imp, module+"/") && !slices.Contains(may, imp) {
				t.Errorf("%s imports %s, which its row in docs/architecture.md does not allow", pkg, strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
	for pkg := range allowed {
		if _, ok := pkgs[strings.TrimSuffix(pkg, "/...")]; !ok {
			t.Errorf("docs/architecture.md names %s, which is not a package of the module", pkg)
		}
	}
}

// rowOf finds pkg's row: its own, or a `dir/...` row of a directory above it.
func rowOf[V any](rows map[string]V, pkg string) (V, bool) {
	if v, ok := rows[pkg]; ok {
		return v, true
	}
	for p, v := range rows {
		if dir, ok := strings.CutSuffix(p, "/..."); ok && (pkg == dir || strings.HasPrefix(pkg, dir+"/")) {
			return v, true
		}
	}
	var zero V
	return zero, false
}

// testConfigsPending are the domain packages whose tests still build
// their options from a configuration file through a copy of cmd/borda's
// mapping (issue 25 §2). The list only shrinks: a package that stops
// importing configs in its tests must leave it.
var testConfigsPending = map[string]string{
	module + "/gateway": "config_fixture_test.go and limiter_options_test.go copy options_gateway.go / options_ratelimit.go",
}

// TestTestsDoNotImportConfigs: a domain package's tests build its typed
// options directly; only cmd/borda (whose mappers are tested there,
// options_mapping_test.go) and the tools at the top of the graph (e2e,
// bench, deploy: rows that may import everything) read configuration
// files in tests. Checked over TestImports and XTestImports from go list.
func TestTestsDoNotImportConfigs(t *testing.T) {
	_, everything := allowList(t)
	configs := module + "/configs"
	seen := map[string]bool{}
	for pkg, imps := range testImports(t) {
		if !slices.Contains(imps, configs) || slices.Contains(configsReaders, pkg) {
			continue
		}
		if _, all := rowOf(everything, pkg); all {
			continue
		}
		if _, ok := testConfigsPending[pkg]; ok {
			seen[pkg] = true
			continue
		}
		t.Errorf("the tests of %s import configs: build the package's options directly (the mapping is tested in cmd/borda)", pkg)
	}
	for pkg := range testConfigsPending {
		if !seen[pkg] {
			t.Errorf("%s no longer imports configs in its tests: drop it from testConfigsPending", pkg)
		}
	}
}
