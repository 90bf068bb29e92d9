package configs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// sources is what Reference reads from the Go files of the package.
type sources struct {
	typeDoc  map[string]string // type name → doc comment
	fieldDoc map[string]string // "Type.Field" → doc comment
	grouped  map[string]bool   // "Type.Field" without a comment right after a commented field
	env      []envOverride
}

type envOverride struct {
	name   string
	target []string // Go selector path after cfg: ["Redis", "URL"]
}

func parseSources(dir string) (*sources, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, fmt.Errorf("listing sources: %w", err)
	}
	src := &sources{typeDoc: map[string]string{}, fieldDoc: map[string]string{}, grouped: map[string]bool{}}
	fset := token.NewFileSet()
	parsed := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		f, err := parser.ParseFile(fset, path, data, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", path, err)
		}
		parsed++
		src.collect(f, fset)
	}
	if parsed == 0 {
		return nil, fmt.Errorf("reading config sources: no Go files in %s", dir)
	}
	return src, nil
}

func (s *sources) collect(f *ast.File, fset *token.FileSet) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok {
					continue
				}
				doc := ts.Doc
				if doc == nil && len(d.Specs) == 1 {
					doc = d.Doc
				}
				s.typeDoc[ts.Name.Name] = strings.TrimSpace(doc.Text())
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				prevCommented, prevLine := false, 0
				for _, fld := range st.Fields.List {
					line := fset.Position(fld.Pos()).Line
					for _, n := range fld.Names {
						key := ts.Name.Name + "." + n.Name
						if fld.Doc != nil {
							s.fieldDoc[key] = strings.TrimSpace(fld.Doc.Text())
						} else if prevCommented && line == prevLine+1 {
							s.grouped[key] = true
						}
					}
					prevCommented = fld.Doc != nil || (prevCommented && line == prevLine+1)
					prevLine = fset.Position(fld.End()).Line
				}
			}
		case *ast.FuncDecl:
			if d.Name.Name == "ApplyEnv" && d.Recv == nil && d.Body != nil {
				s.env = append(s.env, envOverrides(d.Body)...)
			}
		}
	}
}

// envOverrides finds `if v, ok := get("NAME"); ok { cfg.A.B = … }` in
// ApplyEnv's body, in order.
func envOverrides(body *ast.BlockStmt) []envOverride {
	var out []envOverride
	ast.Inspect(body, func(n ast.Node) bool {
		ifs, ok := n.(*ast.IfStmt)
		if !ok {
			return true
		}
		init, ok := ifs.Init.(*ast.AssignStmt)
		if !ok || len(init.Rhs) != 1 {
			return true
		}
		call, ok := init.Rhs[0].(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		e := envOverride{name: "(see ApplyEnv)"}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			e.name, _ = strconv.Unquote(lit.Value)
		} else if sel, ok := call.Args[0].(*ast.Ident); ok {
			e.name = "(the variable named by " + sel.Name + ")"
		}
		for _, st := range ifs.Body.List {
			if as, ok := st.(*ast.AssignStmt); ok && len(as.Lhs) == 1 {
				e.target = selectorPath(as.Lhs[0])
				break
			}
		}
		out = append(out, e)
		return true
	})
	// The variable whose name is configured (auth.jwt_secret_env) reads
	// best with that key's default.
	for i, e := range out {
		if strings.HasPrefix(e.name, "(the variable named by") && slices.Equal(e.target, []string{"Auth", "JWTSecret"}) {
			out[i].name = Default().Auth.JWTSecretEnv + " (named by auth.jwt_secret_env)"
		}
	}
	return out
}

// selectorPath turns cfg.Redis.URL into [Redis URL].
func selectorPath(e ast.Expr) []string {
	var path []string
	for {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			break
		}
		path = append([]string{sel.Sel.Name}, path...)
		e = sel.X
	}
	return path
}

// envTarget renders the key an override sets (the YAML path, or the Go
// field for yaml:"-" fields that only the environment sets) and its doc.
func (s *sources) envTarget(target []string) (string, string) {
	t := reflect.TypeOf(Config{})
	var keys []string
	doc := ""
	envOnly := false
	for _, name := range target {
		f, ok := t.FieldByName(name)
		if !ok || len(f.Index) != 1 {
			return "`" + strings.Join(target, ".") + "`", ""
		}
		doc = s.docOf(t, f.Index[0])
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "-" {
			envOnly = true
			key = name
		}
		keys = append(keys, key)
		t = indirect(f.Type)
	}
	if len(keys) == 0 {
		return "", ""
	}
	if envOnly {
		return "environment only (no key in the file)", doc
	}
	return "`" + strings.Join(keys, ".") + "`", doc
}

// docOf returns the description of field i of struct t: its doc comment;
// for a field declared right below a commented one without a blank line
// ("ReadTimeout and WriteTimeout bound …"), that comment; else the doc of
// the struct type it holds; else, for a lone field such as AMQP.URL, the
// doc of t itself.
func (s *sources) docOf(t reflect.Type, i int) string {
	for j := i; j >= 0; j-- {
		key := t.Name() + "." + t.Field(j).Name
		if d := s.fieldDoc[key]; d != "" {
			return d
		}
		if !s.grouped[key] {
			break
		}
	}
	f := t.Field(i)
	if et := elemType(f.Type); isObject(et) && s.typeDoc[et.Name()] != "" {
		return s.typeDoc[et.Name()]
	}
	return s.typeDoc[t.Name()]
}
