package doccheck

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// root is the module root, seen from this package's directory.
const root = "../.."

// decl is one function or method declaration of the module.
type decl struct {
	dir    string // its package's directory, relative to root
	pkg    string // its package's name
	params []string
	// results are the result types, printed.
	results []string
	// variadic marks a last parameter of the form ...T.
	variadic bool
}

// module is what the docs may name: every package of the module, by name
// and directory, and their top-level and member names.
type module struct {
	fset *token.FileSet
	// dirs is package name → the directories of packages of that name.
	dirs map[string][]string
	// names is directory → every top-level name it declares (types,
	// functions, constants, variables; tests and examples included),
	// "Type.Member" for each method and struct field.
	names map[string]map[string]bool
	// funcs is "dir Name" and "dir Type.Method" → declarations; byName is
	// a function or method name → every declaration of it.
	funcs  map[string]decl
	byName map[string][]decl
	// types is every type name the module declares.
	types map[string]bool
	// sources is every Go file's text by path, relative to root.
	sources map[string][]byte
	// files is every parsed Go file by path, relative to root.
	files map[string]*ast.File
}

var (
	loadOnce sync.Once
	loaded   *module
	loadErr  error
)

// loadModule parses every Go file of the module once (no type checking:
// names and signatures as written).
func loadModule(t *testing.T) *module {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = parseModule() })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

func parseModule() (*module, error) {
	m := &module{fset: token.NewFileSet(), dirs: map[string][]string{}, names: map[string]map[string]bool{},
		funcs: map[string]decl{}, byName: map[string][]decl{}, types: map[string]bool{}, sources: map[string][]byte{}, files: map[string]*ast.File{}}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(m.fset, rel, src, parser.ParseComments)
		if err != nil {
			return err
		}
		m.sources[rel], m.files[rel] = src, f
		m.add(filepath.Dir(rel), f)
		return nil
	})
	return m, err
}

func (m *module) add(dir string, f *ast.File) {
	pkg := strings.TrimSuffix(f.Name.Name, "_test")
	if m.names[dir] == nil {
		m.names[dir] = map[string]bool{}
		m.dirs[pkg] = append(m.dirs[pkg], dir)
	}
	names := m.names[dir]
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			key := funcKey(d)
			names[key] = true
			fd := m.signature(dir, pkg, d.Type)
			m.funcs[dir+" "+key] = fd
			m.byName[d.Name.Name] = append(m.byName[d.Name.Name], fd)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					m.types[s.Name.Name] = true
					m.addMembers(dir, pkg, s)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
}

// addMembers records a struct's fields and an interface's methods as
// "Type.Member".
func (m *module) addMembers(dir, pkg string, s *ast.TypeSpec) {
	var fields *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			m.names[dir][s.Name.Name+"."+n.Name] = true
			if ft, ok := f.Type.(*ast.FuncType); ok {
				fd := m.signature(dir, pkg, ft)
				m.funcs[dir+" "+s.Name.Name+"."+n.Name] = fd
				m.byName[n.Name] = append(m.byName[n.Name], fd)
			}
		}
		if len(f.Names) == 0 { // an embedded type's name is a field
			if id := typeName(f.Type); id != "" {
				m.names[dir][s.Name.Name+"."+id] = true
			}
		}
	}
}

func (m *module) signature(dir, pkg string, ft *ast.FuncType) decl {
	d := decl{dir: dir, pkg: pkg}
	for _, f := range ft.Params.List {
		n := max(len(f.Names), 1)
		for range n {
			d.params = append(d.params, m.print(f.Type))
		}
		if _, ok := f.Type.(*ast.Ellipsis); ok {
			d.variadic = true
		}
	}
	if ft.Results != nil {
		for _, f := range ft.Results.List {
			for range max(len(f.Names), 1) {
				d.results = append(d.results, m.print(f.Type))
			}
		}
	}
	return d
}

func (m *module) print(n ast.Node) string {
	var b bytes.Buffer
	_ = printer.Fprint(&b, m.fset, n)
	return b.String()
}

// funcKey is "Name" of a function, "Type.Name" of a method.
func funcKey(d *ast.FuncDecl) string {
	if recv := receiverType(d); recv != "" {
		return recv + "." + d.Name.Name
	}
	return d.Name.Name
}

func receiverType(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	return typeName(d.Recv.List[0].Type)
}

// typeName is the name of T, *T, T[P] or pkg.T.
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}

// declText is the source of the top-level declaration named name ("Type"
// or "Func" or "Type.Method") in file, with its doc comment left out.
func (m *module) declText(file, name string) (string, bool) {
	f, ok := m.files[file]
	if !ok {
		return "", false
	}
	src := m.sources[file]
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if funcKey(d) == name {
				return string(src[m.fset.Position(d.Pos()).Offset:m.fset.Position(d.End()).Offset]), true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == name {
					return string(src[m.fset.Position(d.Pos()).Offset:m.fset.Position(d.End()).Offset]), true
				}
			}
		}
	}
	return "", false
}
