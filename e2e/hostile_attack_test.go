package e2e

// Attacks of a reviewer who read only the docs (docs/edge.md,
// docs/webhooks.md, docs/configuration.md) and tried to break their
// promises against the real binary. Each test is named after what the
// attack tries and fails on the code before its fix.

import (
	"net/http"
	"strings"
	"testing"
)

// attackDoubleEncodedWalkOuts are spellings of /api/../admin whose second
// decoding pass gets its hex digits from escapes of the first: "%25%32%65"
// is "%2e" after one pass and "." after two, as "%252e" is. A
// twice-decoding upstream resolves each of these to /admin, outside the
// route's prefix and its upstream base path /v1 (docs/edge.md, "Escaped
// slashes and other spellings of ..").
var attackDoubleEncodedWalkOuts = []string{
	"/api/%25%32%65%25%32%65/admin",              // %2e%2e
	"/api/%25%32%45%25%32%45/admin",              // %2E%2E
	"/api/%252%65%252%65/admin",                  // only the second digit escaped
	"/api/%25%32e%25%32e/admin",                  // only the first
	"/api/..%25%32%66admin",                      // ..%2f
	"/api/..%25%35%63admin",                      // ..%5c
	"/api/x%25%32%66..%25%32%66..%25%32%66admin", // x%2f..%2f..%2f
	"/full/%25%32%65%25%32%65/admin",             // through a route that keeps the prefix
	"/api/%25%32%35%32%65%25%32%35%32%65/admin",  // %252e after one pass: three decodings
	"/api/a%25%30%30/../admin",                   // %00 after one pass
}

// GET /api/%25%32%65%25%32%65/admin reached the api upstream as
// /v1/%25%32%65%25%32%65/admin, which an upstream decoding twice reads as
// /v1/../admin = /admin: the double-encoding check only knew "%25" followed
// by two literal hex digits (%252e). Every spelling is now the 400 problem
// "codificação dupla" and no upstream sees it.
func TestHostileAttackDoubleEncodingWithEscapedHexDigitsIsRefused(t *testing.T) {
	api, admin := recordingUpstream(t), recordingUpstream(t)
	p := startServe(t, pathServe(api.URL, admin.URL, ""))
	for _, target := range attackDoubleEncodedWalkOuts {
		resp, body := pathGet(t, p.public, target)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "codificação dupla") {
			t.Errorf("%s: got %d %q, want the 400 problem \"codificação dupla\"", target, resp.StatusCode, body)
		}
	}
	for _, r := range append(api.requests(), admin.requests()...) {
		t.Errorf("an upstream saw %q", r.RequestURI)
	}
	// An escaped percent before an ordinary escaped character still passes
	// as sent ("%25%34%31" is "%41" after one pass: a letter, not a
	// separator or a dot).
	resp, _ := pathGet(t, p.public, "/api/a%25%34%31")
	if got := api.requests(); resp.StatusCode != 200 || len(got) != 1 || got[0].RequestURI != "/v1/a%25%34%31" {
		t.Fatalf("/api/a%%25%%34%%31: %d, upstream saw %+v", resp.StatusCode, got)
	}
}
