package e2e

import (
	"strings"
	"testing"
)

// TestConfigCheckListsEveryProblemOfAFile: the real binary, given a file
// with seven problems at several levels, exits 2 and prints all seven in
// one run, each with its field path, its line and, for a misspelt key, the
// key meant.
func TestConfigCheckListsEveryProblemOfAFile(t *testing.T) {
	out, code := secretsRun(t, cleanEnv(), "config", "check", "--config", "../configs/testdata/check/several_problems.yaml")
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out)
	}
	for _, want := range []string{
		"7 problem(s):",
		"\n  listne: unknown key; did you mean `listen`? (line 4)\n",
		"\n  routes[2].path_prefx: unknown key; did you mean `path_prefix`? (line 21)\n",
		"\n  routes[2].rate_limits[1]: \"nope\" is not a rule in rate_limits.rules (line 23)\n",
		"\n  rate_limits.rules[0].limit: want an integer, got \"fifty\" (line 28)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestConfigCheckWarnsButPassesAnIncompletePipeline: a valid file whose
// webhook has no WEBHOOK_TOKENS passes (exit 0, "valid") with a warning
// naming the variable to set.
func TestConfigCheckWarnsButPassesAnIncompletePipeline(t *testing.T) {
	out, code := secretsRun(t, cleanEnv(), "config", "check", "--config", "../configs/testdata/check/incomplete_pipeline.yaml")
	if code != 0 || !strings.Contains(out, ": valid (") {
		t.Fatalf("exit %d, want 0 and valid:\n%s", code, out)
	}
	for _, want := range []string{"webhook.path: ", "set WEBHOOK_TOKENS", "set META_TOKENS", "set LEGACY_WEBHOOK_URL", "set LEGACY_WEBHOOK_HMAC_SECRET", "set REDIS_URL"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "borda: warning: "); n != 6 {
		t.Errorf("%d warnings, want 6:\n%s", n, out)
	}
}
