package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		case "version":
			continue
		}
		code, stdout, stderr := runArgs(args...)
		if code != 0 || !strings.Contains(stdout+stderr, "-config") && c.name != "healthcheck" {
			t.Errorf("borda %s: code %d, output %q", strings.Join(args, " "), code, stdout+stderr)
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
		if code, stdout, _ := runArgs(c, "--help"); code != 0 || !strings.Contains(stdout, "Usage") {
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
