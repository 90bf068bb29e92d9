package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/olp-edu/borda/configs"
)

// newFlags returns a FlagSet for a command with the shared --config flag.
func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("borda "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("BORDA_CONFIG")
	if def == "" {
		def = configs.DefaultPath
	}
	path := fs.String("config", def, "config file (YAML); $BORDA_CONFIG sets the default")
	return fs, path
}

// parseFlags parses args; it returns the exit code to use and false when the
// command must stop (--help: 0, bad flags: 2).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// loadConfig loads and validates path; on failure it prints one line per
// problem to stderr and returns exit code 2.
func loadConfig(path string, stderr io.Writer) (configs.Config, int, bool) {
	cfg, err := configs.Load(path)
	if err != nil {
		var ve *configs.ValidationError
		if errors.As(err, &ve) {
			fmt.Fprintf(stderr, "borda: invalid config %s:\n", path)
			for _, p := range ve.Problems {
				fmt.Fprintln(stderr, "  "+p)
			}
		} else {
			fmt.Fprintf(stderr, "borda: %v\n", err)
		}
		return cfg, 2, false
	}
	return cfg, 0, true
}

// newLogger returns the process logger: JSON lines on stderr, level from
// $BORDA_LOG_LEVEL (debug, info, warn, error; default info).
func newLogger(stderr io.Writer) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(os.Getenv("BORDA_LOG_LEVEL"))); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: lvl}))
}
