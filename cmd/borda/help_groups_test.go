package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTopLevelHelpListsEverySubcommand: `borda --help` listed `dlq
// (list|replay)` without show, then `limits (relax|show)` without probe
// and suggest. Each group's line lists every subcommand the group answers
// (groups, the table its dispatch and help share), and each of them runs.
func TestTopLevelHelpListsEverySubcommand(t *testing.T) {
	var out, errb bytes.Buffer
	run([]string{"--help"}, &out, &errb)
	for group, subs := range groups {
		want := group + " "
		var line string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), want) {
				line = l
			}
		}
		if !strings.HasSuffix(line, "("+strings.Join(subs, "|")+")") {
			t.Errorf("top-level help line of %s = %q, want it to end with (%s)", group, line, strings.Join(subs, "|"))
		}
		for _, sub := range subs {
			var o, e bytes.Buffer
			if code := run([]string{group, sub, "--help"}, &o, &e); code != 0 {
				t.Errorf("borda %s %s --help: exit %d %s", group, sub, code, e.String())
			}
		}
	}
	for _, want := range []string{"list|show|replay", "relax|show|probe|suggest"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("top-level help lacks %s:\n%s", want, out.String())
		}
	}
}
