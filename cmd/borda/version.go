package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// versionLines is what `borda version` prints: the stamped version, then
// what the binary's build info says (runtime/debug.ReadBuildInfo): the
// module version, the VCS revision and time (with "+dirty" for a build
// from a modified tree) and the Go toolchain it was built with. go.mod
// pins the toolchain for its standard-library security fixes, so an
// operator can tell a build with it from one without (README.md).
func versionLines(stamped string, info *debug.BuildInfo, ok bool) []string {
	lines := []string{"borda " + stamped}
	if !ok || info == nil {
		return append(lines, "build info: unavailable (binary built without module support)")
	}
	mod := info.Main.Version
	if mod == "" {
		mod = "(unknown)"
	}
	lines = append(lines, "module: "+info.Main.Path+" "+mod)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	if rev == "" {
		rev = "(unknown: built without VCS information, e.g. -buildvcs=false or outside a checkout)"
	} else {
		if t := settings["vcs.time"]; t != "" {
			rev += " " + t
		}
		if settings["vcs.modified"] == "true" {
			rev += " +dirty"
		}
	}
	lines = append(lines, "revision: "+rev)
	lines = append(lines, "go: "+info.GoVersion)
	var flags []string
	for _, k := range []string{"-race", "-trimpath", "CGO_ENABLED", "GOOS", "GOARCH"} {
		if v, ok := settings[k]; ok {
			flags = append(flags, k+"="+v)
		}
	}
	if len(flags) > 0 {
		lines = append(lines, "build: "+strings.Join(flags, " "))
	}
	return lines
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if code, ok := parseFlags(newBareFlags("version", stderr), args); !ok {
		return code
	}
	info, ok := debug.ReadBuildInfo()
	for _, l := range versionLines(version, info, ok) {
		fmt.Fprintln(stdout, l)
	}
	return 0
}
