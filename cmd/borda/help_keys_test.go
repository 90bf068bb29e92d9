package main

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

// keyLike are the words of a help text that name a config key: dotted
// paths in the reference's notation (redis.url, webhook.sources[].tokens_env)
// and single words in backquotes (`listen`).
var (
	dottedKey = regexp.MustCompile(`\b[a-z][a-z0-9_]*(?:\[\])?(?:\.[a-z<][a-z0-9_<>]*(?:\[\])?)+`)
	quotedKey = regexp.MustCompile("`([a-z][a-z0-9_]*)`")
)

// notKeys are the dotted words of the help that are no config key.
var notKeys = map[string]bool{
	"connection.update": true, // an Evolution event name
	"main.version":      true, // the -ldflags variable
	"e.g":               true,
}

// `borda serve --help` named webhook.tokens, a key the checker refuses
// (WEBHOOK_TOKENS has no file key). Every key-like word of every help text
// (each command's, with its flags, each group's and the top level's) is a
// key of the configuration reference.
func TestHelpNamesOnlyRealConfigKeys(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range configs.Keys() {
		keys[k] = true
	}
	texts := map[string]string{}
	for name := range helps {
		_, stdout, stderr := runArgs(append(strings.Fields(name), "--help")...)
		texts["borda "+name+" --help"] = stdout + stderr
	}
	for group := range groups {
		texts["borda "+group+" --help"] = groupUsage(group)
	}
	_, stdout, _ := runArgs("--help")
	texts["borda --help"] = stdout
	names := make([]string, 0, len(texts))
	for n := range texts {
		names = append(names, n)
	}
	sort.Strings(names)
	checked := 0
	for _, n := range names {
		text := texts[n]
		var words []string
		for _, w := range dottedKey.FindAllString(text, -1) {
			if !notKeys[w] && !strings.HasSuffix(w, ".md") && !strings.HasSuffix(w, ".yaml") {
				words = append(words, w)
			}
		}
		for _, m := range quotedKey.FindAllStringSubmatch(text, -1) {
			words = append(words, m[1])
		}
		for _, w := range words {
			checked++
			if !keys[w] {
				t.Errorf("%s names %q, which is not a config key (docs/configuration.md)", n, w)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d key-like words found in the help texts: is the pattern still right?", checked)
	}
}
