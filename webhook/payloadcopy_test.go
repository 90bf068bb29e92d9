package webhook

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// sharedPayloadDir is the payload set testdata/payloads copies, relative to
// this package's directory: the repository is checked out beside
// shared/cases. A clean clone of the repository alone does not have it.
const sharedPayloadDir = "../../shared/cases/payloads"

// The payload tests (TestEveryPayloadPublishedByteForByte and the others
// reading payloadDir) run on testdata/payloads, a copy of
// shared/cases/payloads; when the shared set changes they keep passing on
// stale bytes. Where the shared set is checked out, the copy must hold
// every one of its files, byte for byte, and nothing else.
func TestPayloadCopyMatchesSharedCases(t *testing.T) {
	if _, err := os.Stat(sharedPayloadDir); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is not checked out beside the repository: nothing to compare %s with", sharedPayloadDir, payloadDir)
	} else if err != nil {
		t.Fatal(err)
	}
	want := readTree(t, sharedPayloadDir)
	got := readTree(t, payloadDir)
	if len(want) == 0 {
		t.Fatalf("%s holds no files", sharedPayloadDir)
	}
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		have, ok := got[name]
		switch {
		case !ok:
			problems = append(problems, name+": missing from "+payloadDir)
		case !bytes.Equal(have, want[name]):
			problems = append(problems, name+": differs from the shared copy")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			problems = append(problems, name+": in "+payloadDir+" but not in the shared set (remove it, or add it there)")
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Logf("refresh from the repository root: cp -Rf ../shared/cases/payloads/. webhook/testdata/payloads/")
	}
}

// readTree returns every regular file under dir by its slash-separated
// path relative to dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return out
}
