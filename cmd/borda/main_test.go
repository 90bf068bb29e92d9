package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

func runArgs(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUnknownCommandExits2(t *testing.T) {
	code, _, stderr := runArgs("serv")
	if code != 2 || !strings.Contains(stderr, `unknown command "serv"`) {
		t.Errorf("code %d stderr %q", code, stderr)
	}
}

func TestHelpListsEveryCommand(t *testing.T) {
	code, stdout, _ := runArgs("--help")
	if code != 0 {
		t.Fatalf("code %d", code)
	}
	for _, c := range commands() {
		if !strings.Contains(stdout, c.name) {
			t.Errorf("--help does not list %s", c.name)
		}
	}
}

// Every command's --help starts with its usage line and what it does
// (then the flags), and exits 0 without doing its job.
func TestEveryCommandAnswersHelp(t *testing.T) {
	for _, c := range commands() {
		args := []string{c.name, "--help"}
		switch c.name {
		case "config":
			args = []string{"config", "check", "--help"}
		case "dlq":
			args = []string{"dlq", "list", "--help"}
		case "limits":
			args = []string{"limits", "show", "--help"}
		}
		code, stdout, stderr := runArgs(args...)
		out := stdout + stderr
		if code != 0 || !strings.Contains(out, "-config") && c.name != "healthcheck" && c.name != "version" {
			t.Errorf("borda %s: code %d, output %q", strings.Join(args, " "), code, out)
		}
		checkHelp(t, strings.Join(args[:len(args)-1], " "), out)
		if c.name == "version" && strings.Contains(out, "borda "+version) {
			t.Errorf("borda version --help printed the version: %q", out)
		}
	}
}

// Every help entry, subcommands included, is what `borda <name> --help`
// prints, and long-running commands name the signals they handle.
func TestEveryHelpEntryAnswers(t *testing.T) {
	for name := range helps {
		code, stdout, stderr := runArgs(append(strings.Fields(name), "--help")...)
		if code != 0 {
			t.Errorf("borda %s --help: code %d", name, code)
		}
		checkHelp(t, name, stdout+stderr)
	}
	for name, sigs := range map[string][]string{
		"serve":          {"SIGTERM", "SIGINT", "SIGHUP"},
		"forward":        {"SIGTERM", "SIGINT"},
		"consume-events": {"SIGTERM", "SIGINT"},
	} {
		_, _, stderr := runArgs(name, "--help")
		for _, s := range sigs {
			if !strings.Contains(stderr, s) {
				t.Errorf("borda %s --help does not mention %s", name, s)
			}
		}
	}
}

// checkHelp: out starts with "usage: borda <name>", then a blank line and
// a description line.
func checkHelp(t *testing.T, name, out string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "usage: borda "+name) {
		t.Errorf("borda %s --help does not start with %q:\n%s", name, "usage: borda "+name, out)
		return
	}
	if len(lines) < 3 || lines[1] != "" || strings.TrimSpace(lines[2]) == "" {
		t.Errorf("borda %s --help has no description line after its usage:\n%s", name, out)
	}
}

// The help names only environment variables the code reads: the config
// overrides (configs.ApplyEnv, observed through its lookup function),
// BORDA_CONFIG (newFlags) and BORDA_LOG_LEVEL (newLogger).
func TestHelpNamesOnlyVariablesTheCodeReads(t *testing.T) {
	read := map[string]bool{}
	cfg := configs.Default()
	if err := configs.ApplyEnv(&cfg, func(name string) (string, bool) { read[name] = true; return "", false }); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BORDA_CONFIG", "/from/env.yaml")
	if _, path := newFlags("serve", io.Discard); *path == "/from/env.yaml" {
		read["BORDA_CONFIG"] = true
	}
	t.Setenv("BORDA_LOG_LEVEL", "error")
	var logged bytes.Buffer
	if newLogger(&logged).Info("dropped"); logged.Len() == 0 {
		read["BORDA_LOG_LEVEL"] = true
	}
	for name := range envDoc {
		if !read[name] {
			t.Errorf("envDoc describes %s, which the code does not read", name)
		}
	}
	for _, name := range configEnv {
		if !read[name] {
			t.Errorf("configEnv lists %s, which configs.ApplyEnv does not read", name)
		}
	}
	for name := range read {
		if _, ok := envDoc[name]; !ok {
			t.Errorf("the code reads %s but envDoc does not describe it", name)
		}
	}
	for cmd, h := range helps {
		for _, name := range h.env {
			if _, ok := envDoc[name]; !ok {
				t.Errorf("borda %s --help names %s, which envDoc does not describe", cmd, name)
			}
		}
	}
}

// `borda config check configs/production.yaml` (a positional path) ended
// flag parsing and checked configs/local.yaml instead, exiting 0.
func TestPositionalArgumentIsRefusedNotIgnored(t *testing.T) {
	for _, args := range [][]string{
		{"config", "check", "../../configs/production.yaml"},
		{"serve", "extra", "--config", "/nonexistent.yaml"},
	} {
		code, _, stderr := runArgs(args...)
		if code != 2 || !strings.Contains(stderr, "unexpected argument") {
			t.Errorf("borda %s: code %d stderr %q, want 2 and 'unexpected argument'", strings.Join(args, " "), code, stderr)
		}
	}
}

func TestSubcommandGroupsAnswerHelp(t *testing.T) {
	for _, c := range []string{"config", "dlq", "limits"} {
		if code, stdout, _ := runArgs(c, "--help"); code != 0 || !strings.HasPrefix(stdout, "usage: borda "+c) {
			t.Errorf("borda %s --help: code %d stdout %q", c, code, stdout)
		}
	}
}

func TestConfigCheckShippedConfigs(t *testing.T) {
	for _, f := range []string{"local.yaml", "staging.yaml", "production.yaml"} {
		code, stdout, stderr := runArgs("config", "check", "--config", filepath.Join("..", "..", "configs", f))
		if code != 0 || !strings.Contains(stdout, "valid") {
			t.Errorf("%s: code %d stderr %q", f, code, stderr)
		}
	}
}

func TestConfigCheckInvalidFileExits2WithOneLinePerProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "environment: prod\nroutes:\n  - name: a\n    upstream: \"nope\"\n"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runArgs("config", "check", "--config", path)
	if code != 2 {
		t.Fatalf("code %d, want 2", code)
	}
	for _, field := range []string{"environment:", "routes[0].upstream:"} {
		if !strings.Contains(stderr, "\n  "+field) {
			t.Errorf("stderr lacks a line for %s:\n%s", field, stderr)
		}
	}
}

func TestConfigCheckRedactsSecrets(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://:hunter2@127.0.0.1:6379")
	t.Setenv("WEBHOOK_TOKENS", "hunter3")
	code, stdout, stderr := runArgs("config", "check", "--config", filepath.Join("..", "..", "configs", "local.yaml"))
	if code != 0 {
		t.Fatalf("code %d: %s", code, stderr)
	}
	if strings.Contains(stdout, "hunter") {
		t.Errorf("config check prints a secret:\n%s", stdout)
	}
}
