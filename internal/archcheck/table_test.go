package archcheck

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// table is the package table of docs/architecture.md ("## Packages":
// | Package | Owns | May import (within Borda) |) read as an allow-list.
type table struct {
	// allowed is package → the Borda packages its production code may
	// import: the names of the third cell before "tests also:".
	allowed map[string][]string
	// testsAlso is package → the Borda packages its tests may import
	// besides those: the names after "tests also:".
	testsAlso map[string][]string
	// everything marks the rows that may import anything ("everything",
	// or the test helpers' "the packages they exercise").
	everything map[string]bool
	// support are the test-support packages (rows whose second cell
	// starts with "test support"): any package's tests may import them.
	support map[string]bool
}

// readTable parses the package table of docs/architecture.md. A row
// naming several packages (`a`, `b`) gives each the same lists; "—" is no
// Borda import at all.
func readTable(t *testing.T) table {
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
	names := func(cell string) (out []string) {
		for _, m := range code.FindAllStringSubmatch(cell, -1) {
			out = append(out, module+"/"+m[1])
		}
		return out
	}
	tb := table{allowed: map[string][]string{}, testsAlso: map[string][]string{}, everything: map[string]bool{}, support: map[string]bool{}}
	for _, line := range strings.Split(after, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Fatalf("docs/architecture.md: package table row without three cells: %s", line)
		}
		prod, tests, _ := strings.Cut(cells[2], "tests also:")
		for _, p := range names(cells[0]) {
			if strings.TrimSpace(cells[2]) == "everything" || strings.Contains(cells[2], "the packages they exercise") {
				tb.everything[p] = true
			}
			if strings.HasPrefix(cells[1], "test support") {
				tb.support[p] = true
			}
			tb.allowed[p], tb.testsAlso[p] = names(prod), names(tests)
		}
	}
	if len(tb.allowed) < 10 {
		t.Fatalf("docs/architecture.md: package table has only %d packages", len(tb.allowed))
	}
	return tb
}

// TestImportsFollowThePackageTable: the package table of
// docs/architecture.md is the allow-list. Every package of the module has
// a row, and imports (production code) only the Borda packages its row
// names, so the table cannot drift from the code.
func TestImportsFollowThePackageTable(t *testing.T) {
	tb := readTable(t)
	pkgs := imports(t)
	for pkg, imps := range pkgs {
		may, ok := rowOf(tb.allowed, pkg)
		if !ok {
			t.Errorf("%s has no row in the package table of docs/architecture.md", pkg)
			continue
		}
		if _, all := rowOf(tb.everything, pkg); all {
			continue
		}
		for _, imp := range imps {
			if strings.HasPrefix(imp, module+"/") && !slices.Contains(may, imp) {
				t.Errorf("%s imports %s, which its row in docs/architecture.md does not allow", pkg, strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
	for pkg := range tb.allowed {
		if _, ok := pkgs[strings.TrimSuffix(pkg, "/...")]; !ok {
			t.Errorf("docs/architecture.md names %s, which is not a package of the module", pkg)
		}
	}
}

// TestTestImportsFollowThePackageTable: a package's tests (TestImports
// and XTestImports, from go list) import only what its row allows its
// code, what the row adds after "tests also:", the package itself (an
// external _test package) and the test-support packages.
func TestTestImportsFollowThePackageTable(t *testing.T) {
	tb := readTable(t)
	for pkg, imps := range testImports(t) {
		if _, all := rowOf(tb.everything, pkg); all {
			continue
		}
		may, _ := rowOf(tb.allowed, pkg) // a package without a row fails TestImportsFollowThePackageTable
		also, _ := rowOf(tb.testsAlso, pkg)
		for _, imp := range imps {
			if !strings.HasPrefix(imp, module+"/") || imp == pkg || slices.Contains(may, imp) || slices.Contains(also, imp) {
				continue
			}
			if _, ok := rowOf(tb.support, imp); ok {
				continue
			}
			t.Errorf("the tests of %s import %s, which its row in docs/architecture.md does not allow (add it after \"tests also:\" if a test needs it)",
				strings.TrimPrefix(pkg, module+"/"), strings.TrimPrefix(imp, module+"/"))
		}
	}
}

// TestPackageTableIsLayered: the allow-list, tests included, has no
// cycle, so every package sits on a layer below every package allowed to
// import it, and no import, production or test, goes from a lower layer
// to a higher one (the rows that may import everything are the top).
func TestPackageTableIsLayered(t *testing.T) {
	tb := readTable(t)
	edges := map[string][]string{}
	for p, may := range tb.allowed {
		if !tb.everything[p] {
			edges[p] = append(slices.Clone(may), tb.testsAlso[p]...)
		}
	}
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(p string)
	visit = func(p string) {
		switch state[p] {
		case open:
			i := slices.Index(path, p)
			t.Errorf("the package table allows a cycle: %s", strings.ReplaceAll(strings.Join(append(path[i:], p), " → "), module+"/", ""))
			return
		case done:
			return
		}
		state[p] = open
		path = append(path, p)
		for _, q := range edges[p] {
			visit(q)
		}
		path = path[:len(path)-1]
		state[p] = done
	}
	froms := make([]string, 0, len(edges))
	for p := range edges {
		froms = append(froms, p)
	}
	sort.Strings(froms)
	for _, p := range froms {
		visit(p)
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

// TestTestsDoNotImportConfigs: a domain package's tests build its typed
// options directly; only cmd/borda (whose mappers are tested there,
// options_mapping_test.go) and the tools at the top of the graph (e2e,
// bench, deploy: rows that may import everything) read configuration
// files in tests. Checked over TestImports and XTestImports from go list.
func TestTestsDoNotImportConfigs(t *testing.T) {
	tb := readTable(t)
	configs := module + "/configs"
	for pkg, imps := range testImports(t) {
		if !slices.Contains(imps, configs) || slices.Contains(configsReaders, pkg) {
			continue
		}
		if _, all := rowOf(tb.everything, pkg); all {
			continue
		}
		t.Errorf("the tests of %s import configs: build the package's options directly (the mapping is tested in cmd/borda)", pkg)
	}
}
