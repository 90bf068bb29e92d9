package configs

import (
	"fmt"
	"strings"
	"testing"
)

// TestSyntaxErrorNamesTheLineOfTheProblem: yaml.v3 names the line where
// the enclosing block began, so a bad line anywhere in 10 000 routes was
// reported at the first route ("did not find expected key (line 3)").
// Every class of syntax error below, placed at route k of n, is reported
// at its own line.
func TestSyntaxErrorNamesTheLineOfTheProblem(t *testing.T) {
	defects := map[string]string{
		"indented too little": "   path_prefix: /x\n",
		"indented too much":   "      path_prefix: /x\n",
		"a tab":               "\tpath_prefix: /x\n",
		"unclosed flow":       "    hosts: [\"a.example.org\"\n",
		"a stray key":         "  path_prefix /x: y: z\n",
	}
	for _, n := range []int{3, 100, 10000} {
		for _, k := range []int{0, n / 2, n - 1} {
			for name, bad := range defects {
				var b strings.Builder
				b.WriteString("environment: development\nroutes:\n")
				line := 3
				want := 0
				for i := range n {
					fmt.Fprintf(&b, "  - name: r%d\n    upstream: \"http://127.0.0.1:1\"\n", i)
					line += 2
					if i == k {
						b.WriteString(bad)
						want = line
						line++
					}
				}
				r := Check([]byte(b.String()), func(string) (string, bool) { return "", false })
				if len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0].Message, "YAML syntax") {
					t.Fatalf("%s at route %d of %d: %v (want one syntax error)", name, k, n, r.Errors)
				}
				if got := r.Errors[0].Line; got != want {
					t.Errorf("%s at route %d of %d: reported at line %d, the defect is on line %d (%s)", name, k, n, got, want, r.Errors[0])
				}
			}
		}
	}
}

// TestParseSyntaxErrorNamesTheLineOfTheProblem: Load (serve, forward)
// names the problem's line too, not the enclosing block's.
func TestParseSyntaxErrorNamesTheLineOfTheProblem(t *testing.T) {
	doc := "environment: development\nroutes:\n  - name: a\n    upstream: \"http://127.0.0.1:1\"\n  - name: b\n    upstream: \"http://127.0.0.1:1\"\n      path_prefix: /x\n"
	_, err := Parse([]byte(doc), func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "line 7:") {
		t.Fatalf("Parse: %v (want the error on line 7)", err)
	}
	// A type error keeps its own line.
	_, err = Parse([]byte("environment: development\nroutes:\n  - name: [a]\n"), func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("Parse of a type error: %v (want line 3)", err)
	}
}
