package repocheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes is the largest file the repository may hold (the
// screenshots in docs/img are ~150 KB).
const maxTrackedBytes = 1 << 20

// A `go build ./cmd/borda` run from a package directory leaves a 28 MB
// `borda` there, and a commit once took it along (webhook/ingress/borda):
// every clone downloaded it. No tracked file may be a compiled binary
// (ELF, Mach-O, PE) or larger than maxTrackedBytes.
func TestNoBuiltBinaryIsTracked(t *testing.T) {
	out, err := exec.Command("git", "-C", moduleRoot, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (or no git): %v", err)
	}
	magics := [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf}, {'M', 'Z'}}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		path := filepath.Join(moduleRoot, name)
		info, err := os.Lstat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink
		}
		if info.Size() > maxTrackedBytes {
			t.Errorf("%s is tracked and %d bytes (max %d): a build output or a data file that belongs elsewhere", name, info.Size(), maxTrackedBytes)
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		for _, m := range magics {
			if n >= len(m) && bytes.Equal(head[:len(m)], m) {
				t.Errorf("%s is tracked and is a compiled binary (magic % x): remove it with git rm --cached", name, m)
			}
		}
	}
}
