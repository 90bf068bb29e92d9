package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/redact"
)

// runConfig implements `borda config check --config FILE`: report every
// problem of the file in one run (configs.Check: YAML syntax, unknown keys
// with the nearest valid one, wrong types, validation), each with its field
// path and line, and exit 2 when there is any; otherwise print the
// warnings (parts that cannot work as configured, each naming the variable
// to set; allowed production guardrails) on stderr and the effective
// configuration, secrets redacted, on stdout, and exit 0.
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
	data, err := configs.ReadFile(*path)
	if err != nil {
		fmt.Fprintf(stderr, "borda: reading config: %v\n", err)
		return 2
	}
	r := configs.Check(data, os.LookupEnv)
	for _, w := range r.Warnings {
		fmt.Fprintf(stderr, "borda: warning: %s: %s\n", *path, redact.URLs(w.String()))
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(stderr, "borda: invalid config %s: %d problem(s):\n", *path, len(r.Errors))
		for _, e := range r.Errors {
			fmt.Fprintln(stderr, "  "+redact.URLs(e.String()))
		}
		return 2
	}
	cfg := r.Config
	// The deny lists as serve builds them (files read, each entry's width
	// and each list's coverage checked: denylist.List.Check), so a list
	// serve would refuse is not reported valid here.
	if _, err := (&denyLists{}).build(cfg, slog.New(slog.DiscardHandler)); err != nil {
		fmt.Fprintf(stderr, "borda: invalid config %s: 1 problem(s):\n  %s\n", *path, redact.URLs(err.Error()))
		return 2
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
