package ingress

import (
	"strings"
	"testing"
)

const spelledToken = "S3cr3tTok"

// tokenPathSpellings builds every spelling of a path-form token a router
// or a framework reads as one: the source path with path parameters or in
// another letter case, the "t" marker in any case, with parameters,
// percent-encoded, with dots or spaces around it, merged or doubled
// slashes, a token with parameters or a trailing dot, the token after a
// wrong segment, an event with a parameter carrying the token.
func tokenPathSpellings() []string {
	bases := []string{"/webhooks/whatsapp", "/webhooks/whatsapp;x", "/webhooks;a/whatsapp;b=c", "/Webhooks/WhatsApp", "/WEBHOOKS/WHATSAPP;x"}
	markers := []string{"t", "T", "t;x", "T;jsessionid=1", ".t", "t.", "..t", "t..", "%74", "%54", " t", "t "}
	tokens := []string{spelledToken, spelledToken + ";x", spelledToken + ".", spelledToken + ";v=" + spelledToken}
	tails := []string{"", "/", "/messages-upsert", "/messages-upsert/extra", "/" + spelledToken, "/messages-upsert;token=" + spelledToken}
	var out []string
	for _, b := range bases {
		for _, m := range markers {
			for _, tok := range tokens {
				for _, tail := range tails {
					for _, mid := range []string{"", "/x", "/t/a"} {
						for _, sep := range []string{"/", "//"} {
							out = append(out, b+mid+"/"+m+sep+tok+tail)
						}
					}
				}
			}
		}
	}
	return out
}

// TestRedactPathEverySpelling: no spelling of the path form's token
// reaches the redacted path (access log, telemetry key, gateway_metrics),
// through the ingress and through its unconfigured stand-in. Before the
// fix "/webhooks/whatsapp;x/t/TOKEN", "/.t/TOKEN", "/t./TOKEN" and
// "/Webhooks/WhatsApp/t/TOKEN" kept the token.
func TestRedactPathEverySpelling(t *testing.T) {
	t.Parallel()
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	u := NewUnconfigured([]string{"/webhooks/whatsapp"}, nil)
	n := 0
	for _, p := range tokenPathSpellings() {
		for name, redact := range map[string]func(string) string{"ingress": i.RedactPath, "unconfigured": u.RedactPath} {
			if got := redact(p); strings.Contains(got, spelledToken) {
				t.Errorf("%s: RedactPath(%q) = %q keeps the token", name, p, got)
				if n++; n > 20 {
					t.FailNow()
				}
			}
		}
	}
	// A token that held an escaped "/" (escaped_slashes: keep) followed by
	// an event: the whole tail is redacted.
	if got := i.RedactPath("/webhooks/whatsapp/t/S3cr/3tTok/messages-upsert"); strings.Contains(got, "S3cr") || strings.Contains(got, "3tTok") {
		t.Errorf("RedactPath kept a part of a token holding a slash: %q", got)
	}
	// Fresh attack pass 7 W09: a token split by an escaped "/" with no
	// event after it ("/t/<20 chars>%2F<13 chars>", refused 400 under
	// escaped_slashes: reject, still logged) kept its tail: a segment
	// after the token that is no event name is the token's.
	for _, tail := range []string{"def0123456789", "Tok3n", "x9", "tok:en", "a%2Fb"} {
		p := "/webhooks/whatsapp/t/S3cr3tTok3nFirst20ch/" + tail
		if got := i.RedactPath(p); strings.Contains(got, tail) || strings.Contains(got, "S3cr3t") {
			t.Errorf("RedactPath(%q) = %q keeps the token's tail", p, got)
		}
	}
	for in, want := range map[string]string{
		"/webhooks/whatsapp/t/abc/CONNECTION_UPDATE": "/webhooks/whatsapp/t/[redacted]/CONNECTION_UPDATE",
		"/webhooks/whatsapp/t/abc/messages.upsert":   "/webhooks/whatsapp/t/[redacted]/messages.upsert",
		"/webhooks/whatsapp;x/t/abc/messages-upsert": "/webhooks/whatsapp/t/[redacted]/messages-upsert",
		"/webhooks/whatsapp/.t/abc":                  "/webhooks/whatsapp/.t/[redacted]",
		"/Webhooks/WhatsApp/t/abc":                   "/webhooks/whatsapp/t/[redacted]",
		"/webhooks/whatsapp/messages-upsert;k=v":     "/webhooks/whatsapp/messages-upsert;[redacted]",
		"/webhooks/whatsappx/t/abc":                  "/webhooks/whatsappx/t/abc", // not under the source
	} {
		if got := i.RedactPath(in); got != want {
			t.Errorf("RedactPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactPathNeverLogsATokenGluedToOtherCharacters is fresh attack pass
// 8's L02: a token glued to other characters in a segment under a source's
// path ("/webhooks/whatsapp/xTOKEN", "token=TOKEN", "TOKEN,1") is not a
// configured token, and the ingress holds only the tokens' digests, so it
// reached the access log whole. Every segment under a source's path that
// is neither a token marker nor an event name is now redacted, in every
// position and base spelling; event names are kept.
func TestRedactPathNeverLogsATokenGluedToOtherCharacters(t *testing.T) {
	t.Parallel()
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	u := NewUnconfigured([]string{"/webhooks/whatsapp"}, nil)
	glued := []string{"x" + spelledToken, spelledToken + "x", "token=" + spelledToken, spelledToken + ",1",
		"Bearer%20" + spelledToken, spelledToken + "%00", "t" + spelledToken, spelledToken + "~", "(" + spelledToken + ")",
		"7" + spelledToken + "7", spelledToken + ".json", "a" + spelledToken + ";b"}
	n := 0
	for _, base := range []string{"/webhooks/whatsapp", "/webhooks/whatsapp;x", "/Webhooks/WhatsApp"} {
		for _, g := range glued {
			for _, shape := range []string{"/%s", "/%s/messages-upsert", "/messages-upsert/%s", "/t/abc/%s", "/%s/t/abc", "//%s"} {
				p := base + strings.Replace(shape, "%s", g, 1)
				for name, redact := range map[string]func(string) string{"ingress": i.RedactPath, "unconfigured": u.RedactPath} {
					if got := redact(p); strings.Contains(got, spelledToken) {
						t.Errorf("%s: RedactPath(%q) = %q keeps the glued token", name, p, got)
						if n++; n > 20 {
							t.FailNow()
						}
					}
				}
			}
		}
	}
	for in, want := range map[string]string{
		"/webhooks/whatsapp/messages-upsert":     "/webhooks/whatsapp/messages-upsert",
		"/webhooks/whatsapp/CONNECTION_UPDATE":   "/webhooks/whatsapp/CONNECTION_UPDATE",
		"/webhooks/whatsapp/x" + spelledToken:    "/webhooks/whatsapp/[redacted]",
		"/webhooks/whatsapp/messages-upsert/42":  "/webhooks/whatsapp/messages-upsert/[redacted]",
		"/api/alunos/x" + spelledToken + "/nota": "/api/alunos/x" + spelledToken + "/nota", // not under a source: documented residual
	} {
		if got := i.RedactPath(in); got != want {
			t.Errorf("RedactPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestIngressServesParamSpellingAsTheRouterMatchesIt: the gateway's router
// sends "/webhooks/whatsapp;x/t/TOKEN" to the ingress; the ingress
// matches it the same way (it answered 404), and an event segment that
// follows a token marker is never the envelope's event.
func TestIngressServesParamSpellingAsTheRouterMatchesIt(t *testing.T) {
	t.Parallel()
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	expect(t, req{target: "/webhooks/whatsapp;x/t/test-token/messages-upsert", body: `{"a":1}`}.do(i), 200, StatusPublishedConfirmed)
	if tg := parseTarget("/x/t/test-token", ""); tg.event != "" {
		t.Errorf("event = %q: the token became the event", tg.event)
	}
	if tg := parseTarget("/T/test-token", ""); tg.event != "" {
		t.Errorf("event = %q: the token became the event", tg.event)
	}
	if tg := parseTarget("/t/tok/messages-upsert", ""); tg.event != "messages-upsert" || tg.pathToken != "tok" {
		t.Errorf("target = %+v", tg)
	}
}

// FuzzRedactPath: for any path the ingress matches, the token it reads
// from the path (the router's view: matchSource, parseTarget) is never a
// segment of the redacted path, nor the event.
func FuzzRedactPath(f *testing.F) {
	for _, p := range tokenPathSpellings()[:200] {
		f.Add(p)
	}
	f.Add("/webhooks/whatsapp;x/t/abc")
	i, _ := newUnitIngress(&testing.T{}, unitConfig(), &fakePublisher{})
	f.Fuzz(func(t *testing.T, p string) {
		src, rest := matchSource(i.sources, p)
		if src == nil {
			return
		}
		// Under a source's path nothing but the source's own segments,
		// token markers, event names and "[redacted]" is logged (L02).
		if out := i.RedactPath(p); !strings.HasPrefix(out, src.path) {
			t.Fatalf("RedactPath(%q) = %q does not start with the source's path", p, out)
		} else {
			for _, seg := range strings.Split(strings.TrimPrefix(out, src.path), "/") {
				seg, _, _ = strings.Cut(seg, ";")
				if seg != "" && seg != redactedSegment && !tokenMarker(seg) && (!eventName(seg) || len(seg) > i.known.eventMax()) {
					t.Fatalf("RedactPath(%q) = %q keeps the opaque segment %q", p, out, seg)
				}
			}
		}
		tg := parseTarget(rest, "")
		if tg.pathToken == "" {
			return
		}
		if tg.event == tg.pathToken {
			t.Fatalf("%q: the event is the token %q", p, tg.pathToken)
		}
		out := i.RedactPath(p)
		for _, seg := range strings.Split(out, "/") {
			if paramless(seg) == tg.pathToken && !tokenMarker(seg) && !isBaseSegment(src, seg) {
				t.Fatalf("RedactPath(%q) = %q keeps the token %q", p, out, tg.pathToken)
			}
		}
	})
}

func isBaseSegment(src *source, seg string) bool {
	for _, s := range src.segs {
		if s == seg {
			return true
		}
	}
	return seg == ""
}

// BenchmarkRedactPath: the gateway redacts every request's path (every
// route), so a path outside the webhook sources, and a clean webhook path
// without a token, must cost no allocation.
func BenchmarkRedactPath(b *testing.B) {
	i, _ := newUnitIngress(&testing.T{}, unitConfig(), &fakePublisher{})
	for _, p := range []string{"/api/alunos/42/notas", "/webhooks/whatsapp/messages-upsert", "/webhooks/whatsapp/t/abc/messages-upsert"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = i.RedactPath(p)
			}
		})
	}
}

// TestRedactPathNeverLogsALettersOnlyTokenGluedToLetters is fresh attack
// pass 10's A09: a token of letters and '-' only ("tok-second-BBBB…",
// shaped like the README's example) glued to letters read as an event
// name and reached the access log and the telemetry keys. An event-name
// segment is printed only when it is shorter than every token (or 24
// characters or fewer, whatever the tokens), so none can hold one.
func TestRedactPathNeverLogsALettersOnlyTokenGluedToLetters(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"tok-second-BBBBBBBBBBBBB", "abcdefghijklmnopqrstuvwxyzABCDEF", "only_letters.and-dashes-xyzwvuts"} {
		i, _ := newUnitIngress(t, flatOptions(tok, "tok-AAAAAAAAAAAAAAAAAAAA1234"), &fakePublisher{})
		paths := []string{"/webhooks/whatsapp/x" + tok, "/webhooks/whatsapp/" + tok + ".json", "/webhooks/whatsapp/messages-upsert-" + tok,
			"/webhooks/whatsapp/messages-upsert/" + tok + "x", "/Webhooks/WhatsApp/x" + tok}
		if len(tok) > minEventMax { // a case variant as long as a token of 24 or fewer prints (documented)
			paths = append(paths, "/webhooks/whatsapp/"+strings.ToUpper(tok[:1])+tok[1:])
		}
		for _, p := range paths {
			if got := i.RedactPath(p); strings.Contains(strings.ToLower(got), strings.ToLower(tok)) {
				t.Errorf("RedactPath(%q) = %q keeps the token", p, got)
			}
		}
		for _, keep := range []string{"/webhooks/whatsapp/messages-upsert", "/webhooks/whatsapp/CONNECTION_UPDATE", "/webhooks/whatsapp/qrcode.updated"} {
			if got := i.RedactPath(keep); got != keep {
				t.Errorf("RedactPath(%q) = %q, want it kept", keep, got)
			}
		}
	}
}

// TestTokenMarkerSpellings: every spelling of the "t" that introduces a
// path token to some parser is a marker, up to 32 bytes; anything else,
// or longer, is not.
func TestTokenMarkerSpellings(t *testing.T) {
	for seg, want := range map[string]bool{
		"t": true, "T": true, "t;x": true, "%74": true, "%54": true, "%74;x": true, ".t": true, "t.": true, " t ": true,
		"t" + strings.Repeat(".", 31): true, "t" + strings.Repeat(".", 32): false,
		"": false, ";t": false, ";x": false, "tt": false, "%7": false, "%zz": false, "x": false, "%2e": false,
	} {
		if got := tokenMarker(seg); got != want {
			t.Errorf("tokenMarker(%q) = %v, want %v", seg, got, want)
		}
	}
}

// TestCutBaseReadsNothingPastThePath: a path shorter than the base, or
// ending inside a segment's parameters, is answered without reading past
// its last byte.
func TestCutBaseReadsNothingPastThePath(t *testing.T) {
	base := baseSegments("/webhooks/whatsapp")
	for _, c := range []struct {
		path, rest string
		ok         bool
	}{
		{"/webhooks", "", false},
		{"/webhooks/", "", false},
		{"/webhooks/whatsapp", "", true},
		{"/webhooks/whatsapp;x", "", true},
		{"/webhooks;v=1/whatsapp;x=2/t/abc", "/t/abc", true},
		{"/webhooks/whatsappx", "", false},
	} {
		rest, ok := cutBase(c.path, base, false)
		if rest != c.rest || ok != c.ok {
			t.Errorf("cutBase(%q) = %q, %v; want %q, %v", c.path, rest, ok, c.rest, c.ok)
		}
	}
}

// TestRedactPathExactForms pins what each rule of the path redaction
// prints, one row per rule: the token after a marker (even one spelled
// like a marker), a tail segment with parameters, a segment equal to the
// token once trimmed, one holding it or held by it (6 bytes or more), a
// bare parameter, the source's spelling normalized on the clean path, and
// event names up to eventMax (24 with the unit tokens) kept.
func TestRedactPathExactForms(t *testing.T) {
	i, _ := newUnitIngress(t, unitConfig(), &fakePublisher{})
	if got := i.known.eventMax(); got != 24 {
		t.Fatalf("eventMax = %d, want 24 (the rows below assume it)", got)
	}
	const base = "/webhooks/whatsapp"
	letters := func(n int) string { return strings.Repeat("e", n) }
	for in, want := range map[string]string{
		base + "/t/t/x/y":                              base + "/[redacted]/[redacted]/[redacted]/[redacted]", // the token "t", and the marker equal to it
		base + "/t/abc/messages-upsert;k=v":            base + "/t/[redacted]/[redacted]",
		base + "/t/abc/messages-upsert/extra":          base + "/t/[redacted]/[redacted]/[redacted]", // more than one segment after the token: all of them
		base + "/t/abc/abc.":                           base + "/t/[redacted]/[redacted]",
		base + "/t/abcdefgh/abcdef":                    base + "/t/[redacted]/[redacted]",
		base + "/t/abcdef/abcdefgh":                    base + "/t/[redacted]/[redacted]",
		base + "/t/abcdefgh/abcde":                     base + "/t/[redacted]/abcde",
		base + "/;token=abc":                           base + "/;[redacted]",
		"/Webhooks/WhatsApp/messages-upsert":           base + "/messages-upsert",
		base + "/" + letters(24):                       base + "/" + letters(24),
		base + "/" + letters(25):                       base + "/[redacted]",
		base + "/t/abc/" + letters(24):                 base + "/t/[redacted]/" + letters(24),
		base + "/messages-upsert/" + letters(25) + ";": base + "/messages-upsert/[redacted]",
	} {
		if got := i.RedactPath(in); got != want {
			t.Errorf("RedactPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTokenSegmentsMarksEverythingPastSixtyFourSegments: up to 64
// segments the pairwise pass marks only what matches a token; past 64 it
// marks every segment that is no marker (bounded work), event names too.
func TestTokenSegmentsMarksEverythingPastSixtyFourSegments(t *testing.T) {
	for _, n := range []int{64, 65} {
		segs := []string{"", "t", "abc", "messages-upsert"}
		for len(segs) < n {
			segs = append(segs, "")
		}
		marked := tokenSegments(segs)
		if want := n > 64; marked[3] != want {
			t.Errorf("%d segments: the event name marked %v, want %v", n, marked[3], want)
		}
		if !marked[2] || marked[1] {
			t.Errorf("%d segments: marks %v, want the token marked and the marker not", n, marked[:4])
		}
	}
}

// TestEventNameIsAtMostSixtyFourLettersDashesUnderscoresDots.
func TestEventNameIsAtMostSixtyFourLettersDashesUnderscoresDots(t *testing.T) {
	for seg, want := range map[string]bool{
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false,
		"messages-upsert": true, "CONNECTION_UPDATE": true, "messages.upsert": true, "": true,
		"x9": false, "a b": false, "a;b": false, "a/b": false, "ção": false,
	} {
		if got := eventName(seg); got != want {
			t.Errorf("eventName(%q) = %v, want %v", seg, got, want)
		}
	}
}
