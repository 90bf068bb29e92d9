package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheRESTStoreTrialInTheDocsChecksProduction runs the shell lines of
// docs/rate-limiting.md, "Trying the REST store locally", as written (but
// the two that start processes: the stand-in and serve) from a shell that
// already holds the README's variables (REDIS_URL, WEBHOOK_TOKENS=change-me,
// …). The block said only to export the REST variables: REDIS_URL still
// chose the Redis store, and production refused the README's short
// secrets (exit 2). Its config check must now pass with the REST store,
// which serves every Redis use (redisconn/restconn), so no warning about it.
func TestTheRESTStoreTrialInTheDocsChecksProduction(t *testing.T) {
	doc, err := os.ReadFile("../docs/rate-limiting.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "### Trying the REST store locally")
	if !ok {
		t.Fatal(`docs/rate-limiting.md lost "### Trying the REST store locally"`)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("no sh block in the section")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "go run ") || strings.HasPrefix(l, "borda serve ") || strings.TrimSpace(l) == "" {
			continue
		}
		lines = append(lines, l)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "borda config check --config configs/production.yaml") {
		t.Fatalf("the block no longer checks configs/production.yaml:\n%s", block)
	}
	bin := borda(t)
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "borda")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euc", strings.Join(lines, "\n"))
	cmd.Dir = ".." // the repository: configs/production.yaml
	cmd.Env = append(cleanEnv(), "PATH="+dir+":"+os.Getenv("PATH"),
		// The README's shell (README.md, "Running it against real services").
		"REDIS_URL=redis://127.0.0.1:6379/0", "AMQP_URL=amqp://guest:guest@127.0.0.1:5672/",
		"DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "WEBHOOK_TOKENS=change-me")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "store upstash-rest") {
		t.Errorf("the docs' REST trial: %v\n%s", err, out)
	}
}
