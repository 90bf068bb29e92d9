package configs

import (
	"bytes"
	"reflect"

	"go.yaml.in/yaml/v3"

	"github.com/olp-edu/borda/internal/redact"
)

// The YAML encoder of go.yaml.in/yaml/v3 keeps every event it has emitted
// (yaml_emitter_emit appends to emitter.events and only advances a head
// index), so one Marshal of a document with E events holds and re-copies
// all E of them: 10 000 routes cost 2.7 GB of allocations per encoding
// and Node.Encode runs that encoder once more before parsing its output
// back. The functions below give the encoder one route, or one top-level
// key, at a time, so its queue stays as large as the largest piece; the
// bytes are the same as one Marshal of the whole tree
// (TestEncodeConfigChunkedMatchesWholeEncoding).

// marshalRedacted is Redacted's encoding: the configuration without its
// routes through a yaml.Node tree (redactNode), then each route marshalled
// on its own from a copy whose every string went through redact.URLs
// (redactedCopy), written where the tree holds "routes".
func marshalRedacted(c Config) ([]byte, error) {
	routes := c.Routes
	c.Routes = nil
	var doc yaml.Node
	if err := doc.Encode(c); err != nil {
		return nil, err
	}
	redactNode(&doc)
	if len(routes) == 0 || mapValue(&doc, "routes") == nil {
		c.Routes = routes
		var whole yaml.Node
		if err := whole.Encode(c); err != nil {
			return nil, err
		}
		redactNode(&whole)
		return marshalChunked(&whole)
	}
	var out bytes.Buffer
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		if k.Value != "routes" {
			b, err := yaml.Marshal(pair(k, v))
			if err != nil {
				return nil, err
			}
			out.Write(b)
			continue
		}
		out.WriteString("routes:\n")
		for j := range routes {
			r := redactedCopy(reflect.ValueOf(routes[j])).Interface().(Route)
			b, err := yaml.Marshal(map[string][]Route{"routes": {r}})
			if err != nil {
				return nil, err
			}
			out.Write(b[bytes.IndexByte(b, '\n')+1:])
		}
	}
	return out.Bytes(), nil
}

// redactedCopy returns a deep copy of v with redact.URLs applied to every
// string (map keys included), as redactNode does to every scalar.
func redactedCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		c := reflect.New(v.Type()).Elem()
		c.SetString(redact.URLs(v.String()))
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		for i := range v.NumField() {
			if c.Field(i).CanSet() {
				c.Field(i).Set(redactedCopy(v.Field(i)))
			}
		}
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(redactedCopy(v.Index(i)))
		}
		return c
	case reflect.Array:
		c := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			c.Index(i).Set(redactedCopy(v.Index(i)))
		}
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			c.SetMapIndex(redactedCopy(it.Key()), redactedCopy(it.Value()))
		}
		return c
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type().Elem())
		c.Elem().Set(redactedCopy(v.Elem()))
		return c
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(redactedCopy(v.Elem()))
		return c
	default:
		return v
	}
}

// marshalChunked is yaml.Marshal(doc) for a document whose root is a
// mapping, marshalling one key at a time and each element of a block
// sequence value on its own. Any other shape is marshalled whole.
func marshalChunked(doc *yaml.Node) ([]byte, error) {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode || root.Style&yaml.FlowStyle != 0 || len(root.Content) == 0 ||
		doc.HeadComment != "" || doc.FootComment != "" || root.HeadComment != "" || root.FootComment != "" {
		return yaml.Marshal(doc)
	}
	var out bytes.Buffer
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if v.Kind != yaml.SequenceNode || v.Style&yaml.FlowStyle != 0 || len(v.Content) < 2 {
			b, err := yaml.Marshal(pair(k, v))
			if err != nil {
				return nil, err
			}
			out.Write(b)
			continue
		}
		for j, item := range v.Content {
			one := *v
			one.Content = []*yaml.Node{item}
			b, err := yaml.Marshal(pair(k, &one))
			if err != nil {
				return nil, err
			}
			if j > 0 {
				// Every piece starts with the key's own line ("routes:\n").
				b = b[bytes.IndexByte(b, '\n')+1:]
			}
			out.Write(b)
		}
	}
	return out.Bytes(), nil
}

// pair is a one-key mapping holding k: v.
func pair(k, v *yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{k, v}}
}
