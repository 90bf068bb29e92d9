package configs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigurationReference fails when docs/configuration.md is not what
// Reference generates from the config structs; BORDA_UPDATE_DOCS=1
// rewrites it.
func TestConfigurationReference(t *testing.T) {
	got, err := Reference(".")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "configuration.md")
	if os.Getenv("BORDA_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v\nGenerate it: %s", path, err, ReferenceRegenerate)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with the config structs (first difference at line %d).\nRegenerate it: %s",
			path, firstDiffLine(got, want), ReferenceRegenerate)
	}
}

// TestEveryConfigKeyIsDocumented fails when a YAML key has no doc comment
// (its field's, or its type's), so the reference never shows a bare key.
func TestEveryConfigKeyIsDocumented(t *testing.T) {
	got, err := Reference(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(got), "\n") {
		if strings.Contains(line, "(undocumented)") {
			t.Errorf("add a doc comment to the field behind: %s", line)
		}
	}
}

func TestReferenceListsEveryKeyAndOverride(t *testing.T) {
	got, err := Reference(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `environment` |", "| `redis.url` | secret |", "| `rate_limits.rules[].window` | duration |",
		"| `cors.policies.<name>.max_age` |", "| `routes[].cookies.forward[].as` |",
		"| `forward.retry_delays` | list of durations | `[1m, 5m, 15m, 60m]` |",
		"| `REDIS_URL` | `redis.url` |", "| `WEBHOOK_TOKENS` | environment only (no key in the file) |",
		"| `AUTH_JWT_SECRET (named by auth.jwt_secret_env)` |",
		"| `webhook.sources[].signature.scheme` |",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("reference lacks %q", want)
		}
	}
}

func TestReferenceNoSources(t *testing.T) {
	if _, err := Reference(t.TempDir()); err == nil {
		t.Fatal("Reference(empty dir) = nil error, want one")
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}
