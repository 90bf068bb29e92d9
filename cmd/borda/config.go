package main

import (
	"context"
	"fmt"
	"io"
)

// runConfig implements `borda config check --config FILE`: validate and
// print the effective configuration with secrets redacted. Exit 2 on an
// invalid file.
func runConfig(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(stdout, groupUsage("config"))
		return 0
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, groupUsage("config"))
		return 2
	}
	fs, path := newFlags("config check", stderr)
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	cfg, code, ok := loadConfig(*path, stderr)
	if !ok {
		return code
	}
	out, err := cfg.Redacted()
	if err != nil {
		fmt.Fprintf(stderr, "borda: rendering config: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "# %s: valid (environment %s, key prefix %q, store %s)\n", *path, cfg.Environment, cfg.KeyPrefix(), cfg.StoreKind())
	stdout.Write(out)
	return 0
}
