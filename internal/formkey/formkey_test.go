package formkey

import (
	"bufio"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
)

// Every key php-cli 8.2 (parse_str) and Rack 2.2 (parse_nested_query)
// were seen to read as access_token, recorded outside this code in the
// gateway's testdata (6 405 single-byte variations of the name, attack
// pass 2 A61), has access_token among its Readings.
func TestReadingsHoldWhatRealParsersRead(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../gateway/testdata/querytoken/readings.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parser, escaped, _ := strings.Cut(line, " ")
		key, err := url.PathUnescape(escaped)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if got := Readings(key); !slices.Contains(got, "access_token") {
			t.Errorf("%s reads %q as access_token; Readings = %q", parser, key, got)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("read %d recorded keys, want the whole file", n)
	}
}

// Keys no modelled parser reads as the name keep apart.
func TestReadingsKeepOtherNamesApart(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"access_tokens", "accesstoken", "xaccess_token", "access-token", "access_token_", "payload2"} {
		if got := Readings(key); slices.Contains(got, "access_token") {
			t.Errorf("Readings(%q) = %q holds access_token", key, got)
		}
	}
}

// Unescape decodes as PHP's urldecode: '+', valid escapes, and an invalid
// '%' kept (vectors written from PHP's documented behaviour).
func TestUnescapeReadsKeysAsPHPDoes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"access_token":       "access_token",
		"access+token":       "access token",
		"access%5Ftoken":     "access_token",
		"access_token%00%zz": "access_token\x00%zz",
		"%":                  "%",
		"%4":                 "%4",
		"%41%4a%4A":          "AJJ",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
