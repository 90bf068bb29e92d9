package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestHostileConfigOfTenThousandRoutesWithCredentials: a file of 10 000
// routes (1.3 MiB) was refused by its size (256 KiB) and, with the bound
// raised, `config check` took 600-960 MB to print it. It is now accepted,
// printed whole, and no upstream credential of any route is printed.
func TestHostileConfigOfTenThousandRoutesWithCredentials(t *testing.T) {
	var b strings.Builder
	b.WriteString("environment: development\nroutes:\n")
	for i := range 10000 {
		fmt.Fprintf(&b, "  - name: r%d\n    hosts: [\"h%d.example.org\"]\n    path_prefix: /p%d\n    upstream: \"http://u:hunter2pass%d@127.0.0.1:1/?token=tok3n%d\"\n", i, i%100, i, i, i)
	}
	path := secretsWriteConfig(t, b.String())
	out, code := secretsRun(t, cleanEnv(), "config", "check", "--config", path)
	if code != 0 {
		t.Fatalf("config check of %d bytes, 10 000 routes: exit %d:\n%.500s", b.Len(), code, out)
	}
	if !strings.Contains(out, "name: r0\n") || !strings.Contains(out, "name: r9999\n") {
		t.Errorf("the effective configuration does not hold every route:\n%.500s", out)
	}
	if strings.Contains(out, "hunter2pass") || strings.Contains(out, "tok3n") {
		i := max(strings.Index(out, "hunter2pass"), strings.Index(out, "tok3n"))
		t.Errorf("a route's credential is printed: …%s…", out[max(0, i-80):min(len(out), i+40)])
	}
}
