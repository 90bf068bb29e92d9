package doccheck

import (
	"fmt"
	"go/ast"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// topDirs are the repository's top-level directories (hidden ones left
// out): a path a document names starts with one of them.
func topDirs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

// TestDocPathsExist: every repository path README.md and docs/*.md name
// (gateway/cors.go, deploy/kubernetes/base/proxy.yaml, bench/...), in
// prose, code spans and command blocks, and every relative link, exists;
// so does the name of dir.Name (internal/redact.Params) and of dir/TestX
// (e2e/TestHostileX). A pattern (a path holding {, <, * or $) is not a
// path, nor is kubectl's deploy/NAME.
func TestDocPathsExist(t *testing.T) {
	m := loadModule(t)
	tops := topDirs(t)
	for i := range tops {
		tops[i] = regexp.QuoteMeta(tops[i])
	}
	pathRe := regexp.MustCompile(`(?:^|[^\w./:-])(?:\./)?((?:` + strings.Join(tops, "|") + `)/[\w./-]*)([{<*$%…]?)`)
	link := regexp.MustCompile(`\]\(([^)#:\s]+)(?:#[^)]*)?\)`)
	for _, d := range documents(t) {
		for n, l := range d.lines {
			for _, g := range pathRe.FindAllStringSubmatch(l, -1) {
				if g[2] != "" {
					continue // a pattern: cmd/borda/options_<area>.go
				}
				p := strings.TrimRight(g[1], ".")
				if msg := pathClaim(m, p, l); msg != "" {
					t.Errorf("%s:%d names %s, %s", d.path, n+1, p, msg)
				}
			}
			for _, g := range link.FindAllStringSubmatch(l, -1) {
				if _, err := os.Stat(filepath.Join(root, filepath.Dir(d.path), g[1])); err != nil {
					t.Errorf("%s:%d links to %s, which does not exist", d.path, n+1, g[1])
				}
			}
		}
	}
}

// pathClaim returns what is wrong with the path p named on line, or "".
func pathClaim(m *module, p, line string) string {
	if _, err := os.Stat(filepath.Join(root, p)); err == nil {
		return ""
	}
	dir, name := filepath.Dir(p), filepath.Base(p)
	if strings.HasPrefix(p, "deploy/") && !strings.Contains(p[len("deploy/"):], "/") && strings.Contains(line, "kubectl") {
		return "" // kubectl's resource/name
	}
	if testName.MatchString(name) { // e2e/TestX
		if !m.names[dir][name] {
			return "a test that does not exist in " + dir
		}
		return ""
	}
	if pkgDir, ident, ok := strings.Cut(p, "."); ok && !strings.Contains(ident, "/") && ident != "" && ident[0] >= 'A' && ident[0] <= 'Z' {
		if _, isPkg := m.names[pkgDir]; isPkg { // internal/redact.Params
			if !m.names[pkgDir][firstTwo(ident)] {
				return "which package " + pkgDir + " does not declare"
			}
			return ""
		}
	}
	return "which does not exist"
}

var (
	// qualified is a code span naming a member: (*Type).Name…, pkg.Name…
	// or value.Name…, with an optional call and what follows it.
	qualified = regexp.MustCompile(`^(?:\(\*?([A-Z]\w*)\)|([a-z]\w*))\.([A-Z]\w*(?:\.[A-Z]\w*)*)(?:\((.*)\)(.*))?$`)
	// call is an unqualified call or signature: Name(…) results.
	call = regexp.MustCompile(`^([A-Z]\w*)\((.*)\)(.*)$`)
	// testName is a test, fuzz test, benchmark or example.
	testName = regexp.MustCompile(`^(?:Test|Fuzz|Benchmark|Example)[A-Z_]\w*$`)
	// member is Type.Member, unqualified.
	member = regexp.MustCompile(`^([A-Z]\w*)\.([A-Z]\w*)$`)
)

// TestDocIdentifiersExist: every Borda name a code span of README.md and
// docs/*.md spells exists, and a call or signature matches the code's
// (docs/testing.md, "Docs that stay true"):
//   - pkg.Name, pkg.Type.Member (a field or method), pkg.TestName, for
//     every package of the module (a directory name that is no package,
//     such as webhook, is an error);
//   - (*Type).Method(…), value.Method(…) and Name(…): a function or
//     method of that name with as many parameters (a type spelled for a
//     parameter, []Rule or telemetry.Event, must be the parameter's
//     type), and as many results when they are spelled;
//   - Type.Member, and every TestX, FuzzX, BenchmarkX and ExampleX.
func TestDocIdentifiersExist(t *testing.T) {
	m := loadModule(t)
	notPackages := m.directoriesThatAreNoPackage()
	for _, d := range documents(t) {
		spans, _ := d.parse()
		for _, s := range spans {
			if msg := m.check(s.text, notPackages); msg != "" {
				t.Errorf("%s:%d `%s`: %s", d.path, s.line, s.text, msg)
			}
		}
	}
}

// check returns what is wrong with the claim a code span makes, or "".
func (m *module) check(text string, notPackages map[string]bool) string {
	switch {
	case testName.MatchString(text):
		if !m.anyDirHas(text) {
			return "no such test, fuzz test, benchmark or example"
		}
	case qualified.MatchString(text):
		g := qualified.FindStringSubmatch(text)
		recvType, qual, path, args, rest := g[1], g[2], g[3], g[4], g[5]
		hasCall := strings.Contains(text, "(") && !strings.HasPrefix(text, "(")
		if recvType != "" {
			hasCall = strings.Count(text, "(") > 1
			return m.checkCall(recvType+"."+path, "", args, rest, hasCall, true)
		}
		if notPackages[qual] {
			return fmt.Sprintf("%s is a directory of the module, not a package", qual)
		}
		dirs, isPkg := m.dirs[qual]
		if !isPkg || qual == "main" {
			// A value (limiter.Reload(rules)) or another module's package
			// (http.Server): a call is checked when the method is Borda's.
			last := path[strings.LastIndexByte(path, '.')+1:]
			if !hasCall || len(m.byName[last]) == 0 {
				return ""
			}
			return m.checkCall(last, "", args, rest, true, false)
		}
		found := false
		for _, dir := range dirs {
			found = found || m.names[dir][firstTwo(path)]
		}
		if !found {
			return fmt.Sprintf("package %s has no %s", qual, firstTwo(path))
		}
		if hasCall {
			return m.checkCall(path, qual, args, rest, true, true)
		}
	case call.MatchString(text):
		g := call.FindStringSubmatch(text)
		if len(m.byName[g[1]]) == 0 {
			return "no function or method of that name"
		}
		return m.checkCall(g[1], "", g[2], g[3], true, false)
	case member.MatchString(text):
		// Only a Borda type's: URL.Redacted is net/url's.
		if typ := member.FindStringSubmatch(text)[1]; m.types[typ] && !m.anyDirHas(text) {
			return "no type with that field or method"
		}
	}
	return ""
}

// firstTwo is "A.B" of "A.B.C", "A" of "A".
func firstTwo(path string) string {
	parts := strings.SplitN(path, ".", 3)
	return strings.Join(parts[:min(len(parts), 2)], ".")
}

func (m *module) anyDirHas(name string) bool {
	for _, names := range m.names {
		if names[name] {
			return true
		}
	}
	return false
}

// checkCall checks the spelled arguments and results of a call or
// signature of name ("Func", "Type.Method", or a bare method name when
// exact is false) against every declaration it may mean; one that
// matches is enough.
func (m *module) checkCall(name, pkg, args, rest string, hasCall, exact bool) string {
	if !hasCall {
		return ""
	}
	var cands []decl
	switch {
	case exact && pkg != "":
		for _, dir := range m.dirs[pkg] {
			if d, ok := m.funcs[dir+" "+name]; ok {
				cands = append(cands, d)
			}
		}
	case exact:
		for key, d := range m.funcs {
			if strings.HasSuffix(key, " "+name) {
				cands = append(cands, d)
			}
		}
	default:
		cands = m.byName[name]
	}
	if len(cands) == 0 {
		return "no function or method " + name
	}
	spelled := splitArgs(args)
	results := resultCount(rest)
	var seen []string
	for _, d := range cands {
		if d.matches(spelled, results) {
			return ""
		}
		seen = append(seen, fmt.Sprintf("(%s) %s", strings.Join(d.params, ", "), strings.Join(d.results, ", ")))
	}
	sort.Strings(seen)
	return fmt.Sprintf("no declaration of %s takes these arguments: the code has %s", name, strings.Join(seen, "; "))
}

// matches reports whether the spelled arguments (names or types) and
// result count (-1: not spelled) fit d.
func (d decl) matches(args []string, results int) bool {
	switch {
	case d.variadic && len(args) < len(d.params)-1:
		return false
	case !d.variadic && len(args) != len(d.params):
		return false
	case results >= 0 && results != len(d.results):
		return false
	}
	for i, a := range args {
		if i >= len(d.params) || !looksLikeType(a) {
			continue
		}
		want := strings.TrimPrefix(d.params[i], "...")
		if strings.TrimPrefix(a, d.pkg+".") != want && a != want {
			return false
		}
	}
	return true
}

// looksLikeType reports whether a spelled argument is a type ([]Rule,
// *url.URL, telemetry.Event, Options) rather than a name (ctx, rules).
func looksLikeType(a string) bool {
	if strings.HasPrefix(a, "[]") || strings.HasPrefix(a, "*") || strings.HasPrefix(a, "map[") || strings.HasPrefix(a, "...") {
		return true
	}
	if a != "" && a[0] >= 'A' && a[0] <= 'Z' && !strings.ContainsAny(a, "( ") {
		return true
	}
	q, sel, ok := strings.Cut(a, ".")
	return ok && q != "" && sel != "" && sel[0] >= 'A' && sel[0] <= 'Z' && !strings.ContainsAny(a, "( ")
}

// splitArgs splits an argument list at its top-level commas.
func splitArgs(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// resultCount is how many results rest (what follows the parameters)
// spells: " error" is 1, " (*Limiter, error)" 2; -1 when rest spells no
// result list.
func resultCount(rest string) int {
	rest = strings.TrimSpace(rest)
	switch {
	case rest == "":
		return -1
	case strings.HasPrefix(rest, "(") && strings.HasSuffix(rest, ")"):
		return len(splitArgs(rest[1 : len(rest)-1]))
	case regexp.MustCompile(`^[\w.*\[\]]+$`).MatchString(rest):
		return 1
	}
	return -1
}

// directoriesThatAreNoPackage are the base names of the module's
// directories that hold no Go package (webhook): `webhook.Publisher` in
// a document names nothing.
func (m *module) directoriesThatAreNoPackage() map[string]bool {
	out := map[string]bool{}
	for dir := range m.names {
		for d := filepath.Dir(dir); d != "." && d != "/"; d = filepath.Dir(d) {
			if _, ok := m.names[d]; !ok {
				out[filepath.Base(d)] = true
			}
		}
	}
	for name := range m.dirs {
		delete(out, name)
	}
	return out
}

// TestGoSnippetsAreCode: every ```go block of README.md and docs/*.md is
// a piece of compiled code, named on the line before it as
// <!-- code: <file> <Decl> -->: each of its lines (indentation aside) is
// in that declaration, in order and without a gap, so the snippet cannot
// drift from the code it shows. Snippets a reader runs are Example
// functions (their output checked by go test).
func TestGoSnippetsAreCode(t *testing.T) {
	m := loadModule(t)
	marker := regexp.MustCompile(`^<!-- code: (\S+) (\S+) -->$`)
	n := 0
	for _, d := range documents(t) {
		_, fences := d.parse()
		for _, f := range fences {
			if f.lang != "go" {
				continue
			}
			n++
			g := marker.FindStringSubmatch(f.marker)
			if g == nil {
				t.Errorf("%s:%d: a go block without <!-- code: <file> <Decl> --> on the line before it", d.path, f.line)
				continue
			}
			text, ok := m.declText(g[1], g[2])
			if !ok {
				t.Errorf("%s:%d: %s has no declaration %s", d.path, f.line, g[1], g[2])
				continue
			}
			if !containsRun(trimmedLines(strings.Split(text, "\n")), trimmedLines(f.lines)) {
				t.Errorf("%s:%d: the block is not a run of lines of %s in %s:\n%s", d.path, f.line, g[2], g[1], strings.Join(f.lines, "\n"))
			}
		}
	}
	if n == 0 {
		t.Fatal("no go block found: the documents moved?")
	}
}

func trimmedLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return out
}

// containsRun reports whether run appears in lines, contiguous.
func containsRun(lines, run []string) bool {
	for i := 0; i+len(run) <= len(lines); i++ {
		ok := true
		for j := range run {
			if lines[i+j] != run[j] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestReadmeLayoutCoversTheTree: README.md's layout table ("## Layout")
// has a row for every top-level directory of the repository, every row's
// path exists, and every sub-directory a row names (`ingress/`) exists
// under it.
func TestReadmeLayoutCoversTheTree(t *testing.T) {
	readme := documents(t)[0]
	rows := readme.table("| path | job |")
	if len(rows) == 0 {
		t.Fatal("README.md: the layout table (| path | job |) is gone")
	}
	covered := map[string]bool{}
	for _, r := range rows {
		p := strings.Trim(r[0], "`")
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("README.md layout: %s does not exist", p)
		}
		covered[strings.SplitN(strings.TrimSuffix(p, "/"), "/", 2)[0]] = true
		for _, m := range codeSpan.FindAllStringSubmatch(r[1], -1) {
			if sub := m[1]; strings.HasSuffix(sub, "/") && !strings.Contains(sub, " ") {
				if _, err := os.Stat(filepath.Join(root, p, sub)); err != nil {
					t.Errorf("README.md layout: the %s row names %s, which is not in it", p, sub)
				}
			}
		}
	}
	for _, d := range topDirs(t) {
		if !covered[d] {
			t.Errorf("README.md layout: no row for %s/", d)
		}
	}
}

// serviceHelpers are the helpers whose call makes a test skip when a
// service is down (internal/servicetest; brokertest.Topology reads
// AMQPURL).
var serviceHelpers = map[string]string{
	"servicetest.RedisURL":            "Redis",
	"servicetest.RedisClient":         "Redis",
	"servicetest.StartedRedisCluster": "Redis",
	"servicetest.AMQPURL":             "RabbitMQ",
	"brokertest.Topology":             "RabbitMQ",
	"servicetest.DatabaseURL":         "PostgreSQL",
	"servicetest.IsolatedDatabase":    "PostgreSQL",
}

// TestReadmeSkipTableFollowsTheTests: README.md's "what skips" table
// lists, for each service, exactly the packages whose tests call a
// helper that skips without it (serviceHelpers; benchmark files, named
// *bench*_test.go, left out: go test runs no benchmark).
func TestReadmeSkipTableFollowsTheTests(t *testing.T) {
	m := loadModule(t)
	want := map[string]map[string]bool{}
	for path, f := range m.files {
		base := filepath.Base(path)
		if !strings.HasSuffix(base, "_test.go") || strings.Contains(base, "bench") {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok {
				if svc := serviceHelpers[x.Name+"."+sel.Sel.Name]; svc != "" {
					if want[svc] == nil {
						want[svc] = map[string]bool{}
					}
					want[svc][filepath.Dir(path)] = true
				}
			}
			return true
		})
	}
	rows := documents(t)[0].table("| service down | packages whose integration tests skip |")
	if len(rows) != 3 {
		t.Fatalf("README.md: the skip table has %d rows, want Redis, RabbitMQ and PostgreSQL", len(rows))
	}
	for _, r := range rows {
		got := map[string]bool{}
		for _, g := range codeSpan.FindAllStringSubmatch(r[1], -1) {
			if _, isPkg := m.names[g[1]]; isPkg { // not a note's `redis-server`
				got[g[1]] = true
			}
		}
		svc := r[0]
		for p := range want[svc] {
			if !got[p] {
				t.Errorf("README.md skip table, %s: %s is missing (its tests skip without %s)", svc, p, svc)
			}
		}
		for p := range got {
			if !want[svc][p] {
				t.Errorf("README.md skip table, %s: %s is listed, but none of its tests needs %s", svc, p, svc)
			}
		}
	}
}
