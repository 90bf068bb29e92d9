package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTopLevelHelpListsDLQShow: `borda --help` listed `dlq (list|replay)`
// without show, which exists (dlq_show.go).
func TestTopLevelHelpListsDLQShow(t *testing.T) {
	var out, errb bytes.Buffer
	run([]string{"--help"}, &out, &errb)
	if !strings.Contains(out.String()+errb.String(), "list|show|replay") {
		t.Errorf("top-level help lacks list|show|replay:\n%s%s", out.String(), errb.String())
	}
}
