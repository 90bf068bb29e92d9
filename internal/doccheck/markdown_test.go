package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// document is one Markdown file the checks read.
type document struct {
	path  string // relative to root
	lines []string
}

// documents returns README.md and every docs/*.md.
func documents(t *testing.T) []document {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append([]string{filepath.Join(root, "README.md")}, paths...)
	var docs []document
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		docs = append(docs, document{path: rel, lines: strings.Split(string(b), "\n")})
	}
	if len(docs) < 10 {
		t.Fatalf("only %d documents found", len(docs))
	}
	return docs
}

// span is a code span (`...`) of prose, or the text of a fenced block.
type span struct {
	text string
	line int // 1-based
}

// fence is a fenced code block.
type fence struct {
	lang   string
	lines  []string
	line   int    // the opening fence's line, 1-based
	marker string // the line before the opening fence
}

// parse splits d into the code spans of its prose and its fenced blocks.
func (d document) parse() (spans []span, fences []fence) {
	var cur *fence
	for i, l := range d.lines {
		if trimmed := strings.TrimSpace(l); strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				f := fence{lang: strings.TrimPrefix(trimmed, "```"), line: i + 1}
				if i > 0 {
					f.marker = strings.TrimSpace(d.lines[i-1])
				}
				cur = &f
			} else {
				fences = append(fences, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, l)
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(l, -1) {
			spans = append(spans, span{text: m[1], line: i + 1})
		}
	}
	return spans, fences
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// table returns the rows (cells trimmed) of the Markdown table whose
// header line starts with header, or nil.
func (d document) table(header string) [][]string {
	for i, l := range d.lines {
		if !strings.HasPrefix(l, header) {
			continue
		}
		var rows [][]string
		for _, r := range d.lines[i+2:] {
			if !strings.HasPrefix(r, "|") {
				break
			}
			var cells []string
			for _, c := range strings.Split(strings.Trim(r, "| "), " | ") {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows = append(rows, cells)
		}
		return rows
	}
	return nil
}
