package main

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// An operator must be able to tell a build with the pinned security
// toolchain from one without (issue 16 §3): `borda version` prints the Go
// version the binary was built with, the module version and the revision.
func TestVersionPrintsTheToolchainModuleAndRevision(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 {
		t.Fatalf("borda version exited %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "borda "+version+"\n") || !strings.Contains(out.String(), "\ngo: "+runtime.Version()+"\n") {
		t.Errorf("borda version printed %q, want the stamped version and go: %s", out.String(), runtime.Version())
	}
	info := &debug.BuildInfo{
		GoVersion: "go1.26.11",
		Main:      debug.Module{Path: "github.com/olp-edu/borda", Version: "v0.1.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"}, {Key: "-trimpath", Value: "true"}, {Key: "CGO_ENABLED", Value: "0"},
		},
	}
	got := strings.Join(versionLines("v0.1.0", info, true), "\n")
	want := "borda v0.1.0\nmodule: github.com/olp-edu/borda v0.1.0\nrevision: 0123abcd 2026-12-01T10:00:00Z +dirty\ngo: go1.26.11\nbuild: -trimpath=true CGO_ENABLED=0"
	if got != want {
		t.Errorf("versionLines =\n%s\nwant\n%s", got, want)
	}
	if got := versionLines("dev", nil, false); len(got) != 2 || !strings.Contains(got[1], "unavailable") {
		t.Errorf("without build info: %q", got)
	}
}
