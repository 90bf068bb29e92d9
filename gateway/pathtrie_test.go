package gateway

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The trie is an index, not a second semantics: for every route table and
// path, pathTrie.match answers what the ordered scan (matchIn, the
// reference the rest of the suite pins) answers, route and rest alike.

// trieTier sorts prefixes into a tier as newTier does and returns it with
// its trie, built whatever the tier's size.
func trieTier(prefixes []string) ([]*route, *pathTrie) {
	routes := make([]*route, len(prefixes))
	for i, p := range prefixes {
		routes[i] = &route{Name: fmt.Sprintf("r%d", i), Prefix: normalizePrefix(p), Upstream: &url.URL{}}
	}
	slices.SortStableFunc(routes, func(a, b *route) int { return cmp.Compare(len(b.Prefix), len(a.Prefix)) })
	return routes, newPathTrie(routes)
}

func checkTrieMatchesScan(t *testing.T, routes []*route, trie *pathTrie, path string) {
	t.Helper()
	wantR, wantRest := matchIn(routes, path)
	gotR, gotRest := trie.match(path)
	if gotR != wantR || gotRest != wantRest {
		name := func(r *route) string {
			if r == nil {
				return "<nil>"
			}
			return r.Name + " " + r.Prefix
		}
		var table []string
		for _, r := range routes {
			table = append(table, r.Prefix)
		}
		t.Fatalf("path %q over %q: trie gives %s rest %q, scan gives %s rest %q",
			path, table, name(gotR), gotRest, name(wantR), wantRest)
	}
}

// Pieces that exercise every rule of matchPrefix: case, escapes of
// letters and of '/', invalid and truncated escapes, path parameters in
// both spellings, empty segments, dots, and non-ASCII bytes.
var (
	prefixPieces = []string{"a", "b", "api", "API", "v1", "v2", "x y", "%", "ü", "a;b", "", ".", "a.b"}
	pathPieces   = []string{"a", "b", "api", "API", "Api", "v1", "v2", "%61", "%41", "%61pi", "ap%69", "%2F", "%2f",
		"a%2Fb", "a;x", "a%3Bx", "a%3bx", ";", "%3B", "api;v=1", "%", "%4", "%zz", "%25", "x%20y", "x y", "",
		".", "..", "%2e", "ü", "%C3%BC", "a;b", "a;b;c", "v1;", "a.b"}
)

func randomPrefix(r *rand.Rand) string {
	n := r.IntN(4)
	segs := make([]string, n)
	for i := range segs {
		segs[i] = prefixPieces[r.IntN(len(prefixPieces))]
	}
	return "/" + strings.Join(segs, "/")
}

func randomPath(r *rand.Rand) string {
	n := r.IntN(6)
	var b strings.Builder
	for range n {
		b.WriteByte('/')
		b.WriteString(pathPieces[r.IntN(len(pathPieces))])
	}
	if b.Len() == 0 || r.IntN(8) == 0 {
		b.WriteByte('/')
	}
	return b.String()
}

func TestPathTrieMatchesScanOnGeneratedTables(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(28, 1))
	for table := range 400 {
		n := 1 + r.IntN(40)
		prefixes := make([]string, n)
		for i := range prefixes {
			prefixes[i] = randomPrefix(r)
		}
		routes, trie := trieTier(prefixes)
		for range 200 {
			checkTrieMatchesScan(t, routes, trie, randomPath(r))
		}
		// Every prefix's own spellings: itself, under it, with
		// parameters, with a trailing slash.
		for _, p := range prefixes {
			for _, path := range []string{p, p + "/x", p + ";j=1", p + "%3Bj", p + "/", strings.ToUpper(p)} {
				checkTrieMatchesScan(t, routes, trie, path)
			}
		}
		_ = table
	}
}

// FuzzPathTrieMatchesScan: the routes are the lines of the first input
// (each a prefix), the path the second; the trie must agree with the scan.
func FuzzPathTrieMatchesScan(f *testing.F) {
	for _, tc := range [][2]string{
		{"/\n/api\n/api/v1\n/API", "/api/v1/x"},
		{"/api\n/api", "/ap%69;x/y"},
		{"/a;b\n/a", "/a;b;c/d"},
		{"/a//b\n/a", "/a//b"},
		{"/%\n/%25", "/%25/x"},
		{"/x y\n/x", "/x%20y"},
		{"/a/b\n/a", "/a%2Fb"},
		{"/api\n/", "/api%"},
		{"/ü\n/u", "/%C3%BC/x"},
		// Found by mutation testing: the root declared first wins over a
		// deeper prefix; a prefix segment that starts with ';'; an empty
		// segment where the walk looks for the next one.
		{"/\n/api\n/api/v1", "/api/v1/x"},
		{"/;b\n/", "/;b/x"},
		{"/a\n/a/b", "/a//b"},
		{"/a/cde\n/a;b", "/a;b/cde/x"}, // the first route, from the walk, before a later odd one
	} {
		f.Add(tc[0], tc[1])
	}
	f.Fuzz(func(t *testing.T, table, path string) {
		var prefixes []string
		for _, p := range strings.Split(table, "\n") {
			if p != "" && p[0] == '/' {
				prefixes = append(prefixes, p)
			}
		}
		if len(prefixes) == 0 || len(prefixes) > 64 {
			return
		}
		routes, trie := trieTier(prefixes)
		checkTrieMatchesScan(t, routes, trie, path)
	})
}

// The tier switches to the trie at trieMinRoutes; both sides of the
// threshold route the same (TestRouterPrecedence covers a small table).
func TestRouterUsesTheTrieForLargeTiers(t *testing.T) {
	t.Parallel()
	var routes []*route
	for i := range trieMinRoutes + 4 {
		routes = append(routes, &route{Name: fmt.Sprintf("r%d", i), Prefix: fmt.Sprintf("/svc%d", i), Hosts: []string{"h"}, Upstream: &url.URL{}})
	}
	routes = append(routes, &route{Name: "root", Prefix: "/", Hosts: []string{"h"}, Upstream: &url.URL{}})
	rt := newRouter(routes)
	if rt.exact["h"].trie == nil {
		t.Fatalf("a tier of %d routes has no trie", len(routes))
	}
	for _, tc := range []struct{ path, want, rest string }{
		{"/svc7/x", "r7", "/x"},
		{"/svc1", "r1", ""},
		{"/svc%31;p/y", "r1", "/y"},
		{"/svc100", "root", "/svc100"},
	} {
		r, rest := rt.match("h", tc.path)
		if r == nil || r.Name != tc.want || rest != tc.rest {
			t.Errorf("match(%q) = %v %q, want %s %q", tc.path, r, rest, tc.want, tc.rest)
		}
	}
}

// BenchmarkRouterMatch: the first and the last of N path routes on one
// host (issue 28: last/first within 1.2 at 10 000 routes).
func BenchmarkRouterMatch(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		var routes []*route
		for i := range n {
			routes = append(routes, &route{Name: fmt.Sprintf("r%d", i), Prefix: fmt.Sprintf("/svc%05d/api", i), Hosts: []string{"portal.example.org"}, Upstream: &url.URL{}})
		}
		rt := newRouter(routes)
		for _, which := range []struct {
			name string
			path string
		}{{"first", "/svc00000/api/users/42"}, {"last", fmt.Sprintf("/svc%05d/api/users/42", n-1)}} {
			b.Run(fmt.Sprintf("routes=%d/%s", n, which.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if r, _ := rt.match("portal.example.org", which.path); r == nil {
						b.Fatal("no route")
					}
				}
			})
		}
	}
}
