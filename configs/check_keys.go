package configs

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// keyWalker walks a YAML tree beside the Go type it decodes into: it finds
// the unknown keys at every level (with the nearest valid key) and indexes
// every node it passes by line, so a decode error ("line 7: cannot
// unmarshal …") gets its field path.
type keyWalker struct {
	unknown []Finding
	lines   map[int][]indexed
	// shadowed are the paths whose value the file did not give as meant:
	// the key an unknown key was probably meant to be, a value of the
	// wrong type. A validation problem on one of them is a consequence,
	// not a second problem, and is left out.
	shadowed []string
}

// indexed is one node met on a line, with its path.
type indexed struct {
	path string
	node *yaml.Node
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

func (w *keyWalker) walk(n *yaml.Node, t reflect.Type, path string) {
	n = deref(n)
	if n == nil {
		return
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			w.walk(c, t, path)
		}
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if path != "" {
		w.lines[n.Line] = append(w.lines[n.Line], indexed{path, n})
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // a scalar-like type (Duration, Delay) decodes itself
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the wrong type
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				w.walkMerge(v, t, path)
				continue
			}
			child := joinPath(path, k.Value)
			ft, ok := fields.types[k.Value]
			if !ok {
				msg, meant := unknownKeyMessage(k.Value, fields.names)
				w.unknown = append(w.unknown, Finding{Path: child, Line: k.Line, Message: msg})
				if meant != "" {
					w.shadowed = append(w.shadowed, joinPath(path, meant))
				}
				continue
			}
			w.walk(v, ft, child)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, e := range n.Content {
			w.walk(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			w.walk(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value))
		}
	}
}

// walkMerge walks the mappings a YAML merge key (<<: *base) brings in.
func (w *keyWalker) walkMerge(v *yaml.Node, t reflect.Type, path string) {
	v = deref(v)
	if v != nil && v.Kind == yaml.SequenceNode {
		for _, e := range v.Content {
			w.walk(e, t, path)
		}
		return
	}
	w.walk(v, t, path)
}

// typeFinding turns one of yaml.v3's decode errors ("line 7: cannot
// unmarshal !!str `abc` into int") into a finding naming the field: the
// node on that line whose value the message quotes, else the last (the
// deepest) node indexed there.
func (w *keyWalker) typeFinding(e string) Finding {
	m := yamlLine.FindStringSubmatch(e)
	if m == nil {
		return Finding{Message: e}
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	if c := cannotInto.FindStringSubmatch(msg); c != nil {
		msg = fmt.Sprintf("want %s, got %s", wantKind(c[3]), strconv.Quote(c[2]))
	} else if c := tagInto.FindStringSubmatch(msg); c != nil && tagKind[c[1]] != "" {
		msg = fmt.Sprintf("want %s, got %s", wantKind(c[2]), tagKind[c[1]])
	}
	f := Finding{Line: line, Message: msg}
	on := w.lines[line]
	for _, x := range on {
		if x.node.Kind == yaml.ScalarNode && (strings.Contains(m[2], "`"+x.node.Value+"`") || strings.Contains(m[2], strconv.Quote(x.node.Value))) {
			f.Path = x.path
			break
		}
	}
	if f.Path == "" && len(on) > 0 {
		f.Path = on[len(on)-1].path
	}
	if f.Path != "" {
		w.shadowed = append(w.shadowed, f.Path)
	}
	return f
}

// consequence reports whether a validation problem on path follows from a
// finding already made (see shadowed).
func (w *keyWalker) consequence(path string) bool {
	for _, s := range w.shadowed {
		if path == s || strings.HasPrefix(path, s+".") || strings.HasPrefix(path, s+"[") {
			return true
		}
	}
	return false
}

// fieldSet is the YAML keys a struct type accepts, in declaration order.
type fieldSet struct {
	names []string
	types map[string]reflect.Type
}

func yamlFields(t reflect.Type) fieldSet {
	fs := fieldSet{types: map[string]reflect.Type{}}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct {
			inner := yamlFields(f.Type)
			for _, n := range inner.names {
				fs.names = append(fs.names, n)
				fs.types[n] = inner.types[n]
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name) // yaml.v3's default key
		}
		fs.names = append(fs.names, name)
		fs.types[name] = f.Type
	}
	return fs
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// unknownKeyMessage says a key is unknown and names the nearest valid key
// at its level when one is close enough to be a typo (edit distance at
// most a third of the key, and at least 2), else lists the valid keys.
// meant is the key suggested, or "".
func unknownKeyMessage(key string, valid []string) (msg, meant string) {
	best, bestD := "", -1
	for _, v := range valid {
		if d := levenshtein(strings.ToLower(key), v); bestD < 0 || d < bestD {
			best, bestD = v, d
		}
	}
	if best != "" && bestD <= max(2, len(key)/3) {
		return "unknown key; did you mean `" + best + "`?", best
	}
	return "unknown key (valid here: " + strings.Join(valid, ", ") + ")", ""
}

// levenshtein is the edit distance (insertions, deletions, substitutions)
// between a and b, over bytes: YAML keys are ASCII.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
