package configs

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Finding is one problem (or warning) `borda config check` reports about a
// file: where it is and what to do about it.
type Finding struct {
	// Path is the field path in the file's terms: "routes[2].rate_limits[0]",
	// "cors.policies.portal.max_age", "routes[portal].rate_limits[0]" (a
	// route named by its name). Empty when the finding is about the whole
	// file (a YAML syntax error).
	Path string
	// Line is the 1-based line of the key (or list element) in the file; 0
	// when the value is not written in the file (a default, or set by an
	// environment variable).
	Line int
	// Message says what is wrong and, where it is known, the fix ("unknown
	// key; did you mean `path_prefix`?", "set WEBHOOK_TOKENS").
	Message string
}

// String renders the finding as `config check` prints it, field first
// (as every validation problem is written) and line last:
// "routes[2].path_prefx: unknown key; did you mean `path_prefix`? (line 12)".
func (f Finding) String() string {
	var b strings.Builder
	if f.Path != "" {
		b.WriteString(f.Path + ": ")
	}
	b.WriteString(f.Message)
	if f.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", f.Line)
	}
	return b.String()
}

// Report is everything Check found in one file, in one pass.
type Report struct {
	// Config is the effective configuration (file over Default, environment
	// applied, derived fields filled), as Parse returns it. It is only
	// meaningful when Errors is empty.
	Config Config
	// Errors are the problems that make Load refuse the file: YAML syntax,
	// unknown keys at every level, values of the wrong type, and every
	// validation problem. Sorted by line; those with no line last.
	Errors []Finding
	// Warnings do not fail the file: production guardrails allowed by
	// BORDA_ALLOW_WEAK_PRODUCTION=1, and enabled parts that cannot work
	// as configured (Config.Incomplete), each naming what to set.
	Warnings []Finding
}

// Check is Parse reporting every problem of the file at once, each with its
// field path and line, instead of stopping at the first decode error.
// data is the YAML document; lookup reads environment variables
// (os.LookupEnv in production). A YAML syntax error is the one case that
// ends the check early: the rest of the file cannot be read.
func Check(data []byte, lookup func(string) (string, bool)) Report {
	var r Report
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		f := syntaxFinding(err)
		if f.Line > 0 {
			f.Line = problemLine(data, f.Line) // syntaxline.go: yaml.v3 names the enclosing block's line
		}
		r.Errors = append(r.Errors, f)
		return r
	}
	w := &keyWalker{lines: map[int][]indexed{}}
	cfg := Default()
	if doc.Kind != 0 {
		w.walk(&doc, reflect.TypeOf(Config{}), "")
		r.Errors = append(r.Errors, w.unknown...)
		if err := doc.Decode(&cfg); err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				r.Errors = append(r.Errors, Finding{Message: err.Error()})
				return r
			}
			for _, e := range te.Errors {
				r.Errors = append(r.Errors, w.typeFinding(e))
			}
		}
	}
	if err := ApplyEnv(&cfg, lookup); err != nil {
		r.Errors = append(r.Errors, Finding{Message: err.Error()})
	}
	if err := cfg.validate(lookup); err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			r.Errors = append(r.Errors, Finding{Message: err.Error()})
		} else {
			for _, p := range ve.Problems {
				if f := problemFinding(&doc, p); !w.consequence(f.Path) {
					r.Errors = append(r.Errors, f)
				}
			}
		}
	}
	for _, p := range cfg.Warnings {
		r.Warnings = append(r.Warnings, problemFinding(&doc, p))
	}
	for _, f := range cfg.Incomplete() {
		f.Line = lineOf(&doc, f.Path)
		r.Warnings = append(r.Warnings, f)
	}
	byLine(r.Errors)
	byLine(r.Warnings)
	r.Config = cfg
	return r
}

// byLine sorts findings by line, keeping the order of those on one line;
// findings with no line go last.
func byLine(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i].Line, fs[j].Line
		if a == 0 || b == 0 {
			return a != 0 && b == 0
		}
		return a < b
	})
}

var (
	yamlLine    = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	cannotInto  = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (.+)$")
	tagInto     = regexp.MustCompile(`^cannot unmarshal !!(\w+) into (.+)$`)
	problemPath = regexp.MustCompile(`^[a-z_][a-z0-9_]*(?:\.[^.\s:\[]+|\[[^\]]*\])*$`)
)

// syntaxFinding turns a yaml.v3 syntax error ("yaml: line 3: mapping
// values are not allowed in this context") into a finding with its line.
func syntaxFinding(err error) Finding {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return Finding{Message: "YAML syntax: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	return Finding{Line: line, Message: "YAML syntax: " + m[2]}
}

// problemFinding turns a validation problem ("routes[0].upstream: is
// required") into a finding with the line of its field in doc.
func problemFinding(doc *yaml.Node, p string) Finding {
	path, msg, ok := strings.Cut(p, ": ")
	if !ok || !problemPath.MatchString(path) {
		return Finding{Message: p}
	}
	line, canon := locate(doc, path)
	return Finding{Path: canon, Line: line, Message: msg}
}

// tagKind names what a YAML tag holds, in the words of the file.
var tagKind = map[string]string{"seq": "a list", "map": "an object", "str": "a string", "int": "an integer",
	"float": "a number", "bool": "true or false", "null": "nothing"}

// wantKind names what a Go type holds in the words of the YAML file.
func wantKind(goType string) string {
	switch {
	case goType == "configs.Secret":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a map of name: value"
	case strings.Contains(goType, "configs."):
		return "an object (key: value lines)"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return goType
}

// lineOf is locate's line.
func lineOf(doc *yaml.Node, path string) int {
	line, _ := locate(doc, path)
	return line
}

// locate finds path in doc. line is the key's line for an object field,
// the element's for a list element; when the path is not all in the file
// (a default, an environment variable), it is the line of the deepest part
// that is, or 0 when none is. canon is path with a list element named by
// its name ("routes[portal]", as some problems name a route) written by
// its index instead ("routes[0]").
func locate(doc *yaml.Node, path string) (line int, canon string) {
	canon = path
	if doc == nil || doc.Kind == 0 || path == "" {
		return 0, canon
	}
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, seg := range splitPath(path) {
		n = deref(n)
		var next, at *yaml.Node
		switch {
		case seg.index && n.Kind == yaml.SequenceNode:
			if i, err := strconv.Atoi(seg.name); err == nil {
				if i >= 0 && i < len(n.Content) {
					next, at = n.Content[i], n.Content[i]
				}
			} else {
				// routes[portal]: the element whose name is portal.
				for i, e := range n.Content {
					if v := mapValue(deref(e), "name"); v != nil && v.Value == seg.name {
						next, at = e, e
						canon = strings.Replace(canon, "["+seg.name+"]", "["+strconv.Itoa(i)+"]", 1)
						break
					}
				}
			}
		case !seg.index && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg.name {
					next, at = n.Content[i+1], n.Content[i]
					break
				}
			}
		}
		if next == nil {
			return line, canon
		}
		line, n = at.Line, next
	}
	return line, canon
}

type pathSeg struct {
	name  string
	index bool // [name] rather than .name
}

// splitPath splits "routes[a.b].rate_limits[0]" into routes, [a.b],
// rate_limits, [0].
func splitPath(path string) []pathSeg {
	var out []pathSeg
	for path != "" {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return out
			}
			out = append(out, pathSeg{name: path[1:end], index: true})
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			out = append(out, pathSeg{name: path[:end]})
			path = path[end:]
		}
	}
	return out
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return deref(n.Content[i+1])
		}
	}
	return nil
}
