package configs

import (
	"fmt"
	"io"
	"os"
)

// MaxFileBytes bounds a configuration file (16 MiB): 50 000 routes of
// the size the shipped files use (one host, a prefix, an upstream: about
// 110 bytes each, 5.5 MiB) fit with room for richer routes, and
// `borda config check` prints the effective configuration of 10 000
// routes in about 0.7 s and 130 MB (the encoder is given one route at a
// time, yamlchunk.go; BenchmarkConfigCheck10000Routes). A larger file is
// refused by its size before it is parsed: 200 000 routes once made the
// check run out of memory.
const MaxFileBytes = 16 << 20

// ReadFile reads the configuration file at path, refusing one larger
// than MaxFileBytes without reading the rest of it. Errors name the path;
// the content is never quoted.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB: the size supported for a configuration file (about 50 000 routes; docs/configuration.md)", path, MaxFileBytes>>20)
	}
	return data, nil
}
