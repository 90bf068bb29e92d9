package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/olp-edu/borda/configs"
	"github.com/olp-edu/borda/internal/redact"
)

// newFlags returns a FlagSet for a command with the shared --config flag;
// --help prints the command's help (helps[name]) before the flags.
func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := newBareFlags(name, stderr)
	def := os.Getenv("BORDA_CONFIG")
	if def == "" {
		def = configs.DefaultPath
	}
	path := fs.String("config", def, "config file (YAML); $BORDA_CONFIG sets the default")
	return fs, path
}

// newBareFlags returns a FlagSet with no flags yet whose --help prints the
// command's help (helps[name]) before its flags: newFlags adds --config to
// it; healthcheck and version, which read no config file, use it alone.
func newBareFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("borda "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, name)
	return fs
}

// parseFlags parses args; it returns the exit code to use and false when the
// command must stop (--help: 0, bad flags: 2). No command takes positional
// arguments after its flags: one is refused (exit 2) rather than silently
// ending flag parsing, which would drop every flag after it ("borda config
// check prod.yaml" must not check configs/local.yaml).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q (flags take the form --name value)\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
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
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "borda: warning: %s: %s\n", path, w)
	}
	return cfg, 0, true
}

// newLogger returns the process logger: JSON lines on stderr, level from
// $BORDA_LOG_LEVEL (debug, info, warn, error; default info), durations
// written as Go duration strings ("1.5s", not 1500000000). go-redis's own
// log lines (pool and dial notices) go through it too, at warn level, so
// stderr stays one JSON object per line. Every message, string, error and
// Stringer value is passed through redact.URLs (redactLogAttr), so
// no line carries a URL's password or query values, whichever library
// wrote the URL into its error.
func newLogger(stderr io.Writer) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(os.Getenv("BORDA_LOG_LEVEL"))); err != nil {
		lvl = slog.LevelInfo
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{
		Level:       lvl,
		ReplaceAttr: redactLogAttr,
	}))
	redis.SetLogger(redisLog{logger.With("component", "go-redis")})
	return logger
}

// redisLog adapts go-redis's printf logging to slog.
type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, fmt.Sprintf(format, v...))
}

// redactLogAttr is the process logger's ReplaceAttr: durations as Go
// duration strings, and URLs redacted (redact.URLs) in strings,
// errors and fmt.Stringers. The check is one strings.Contains per string
// value; only a value holding "://" pays for the redaction.
func redactLogAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		a.Value = slog.StringValue(a.Value.Duration().String())
	case slog.KindString:
		if s := a.Value.String(); strings.Contains(s, "://") {
			a.Value = slog.StringValue(redact.URLs(s))
		}
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			a.Value = slog.StringValue(redact.URLs(v.Error()))
		case fmt.Stringer:
			a.Value = slog.StringValue(redact.URLs(v.String()))
		}
	}
	return a
}

// redactingWriter passes every write through redact.URLs: the
// backstop for what commands print to stderr outside the logger (`borda:
// dialing amqp: …`, a library error echoing its URL). A write holding no
// "://" goes through as it is; each Fprintf is one write, so a URL is
// never split between two.
type redactingWriter struct{ w io.Writer }

func (r redactingWriter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("://")) {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, redact.URLs(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// setFlagEnv sets each variable of vars whose value is not empty, so that
// a flag (--listen) reaches the config as the variable that sets the same
// key (BORDA_LISTEN) does, validated with the file.
func setFlagEnv(stderr io.Writer, vars map[string]string) bool {
	for name, v := range vars {
		if v == "" {
			continue
		}
		if err := os.Setenv(name, v); err != nil {
			fmt.Fprintf(stderr, "borda: %v\n", err)
			return false
		}
	}
	return true
}
