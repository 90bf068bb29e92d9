package configs

import (
	"fmt"
	"io"
	"os"
)

// MaxFileBytes bounds a configuration file (256 KiB). The shipped files
// are a few KiB; the YAML encoder that prints the effective configuration
// (`borda config check`) takes seconds and gigabytes on a file of a few
// MiB (20 000 routes: 10 s and 1.4 GB), so a larger file is refused before
// it is parsed.
const MaxFileBytes = 256 << 10

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
		return nil, fmt.Errorf("%s is larger than %d KiB: a configuration file is a few KiB (docs/configuration.md)", path, MaxFileBytes>>10)
	}
	return data, nil
}
