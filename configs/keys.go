package configs

import (
	"reflect"
	"sort"
)

// Keys returns every key a config file may hold, in the reference's
// notation (docs/configuration.md): "redis.url" a nested key,
// "routes[].upstream" a key of each list element,
// "cors.policies.<name>.max_age" a key of each map entry; containers are
// listed too ("routes", "routes[].cookies"). Sorted. It is what the
// checker accepts, so help text and docs can be checked against it.
func Keys() []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
			return
		}
		fs := yamlFields(t)
		for _, name := range fs.names {
			path := joinPath(prefix, name)
			out = append(out, path)
			ft := fs.types[name]
			switch ft.Kind() {
			case reflect.Slice:
				walk(ft.Elem(), path+"[]")
			case reflect.Map:
				walk(ft.Elem(), path+".<name>")
			default:
				walk(ft, path)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	sort.Strings(out)
	return out
}
