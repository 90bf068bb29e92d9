package telemetry

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"

	"github.com/olp-edu/borda/keyspace"
)

// hostileTexts are values PostgreSQL refuses in a UTF8 text column, or
// that no log line or key should carry: each member of the class
// "invalid UTF-8 or control character" (issue 13 item 5). A request path
// "%ff" decodes to the raw byte 0xff, "%00" to NUL.
var hostileTexts = map[string]string{
	"raw 0xff (from %ff)":       "/a/\xff",
	"NUL (from %00)":            "/a/\x00b",
	"lone continuation byte":    "/\x80",
	"truncated sequence":        "/euro\xe2\x82",
	"overlong slash":            "/\xc0\xaf",
	"overlong NUL":              "/\xc0\x80",
	"UTF-16 surrogate":          "/\xed\xa0\x80",
	"beyond U+10FFFF":           "/\xf4\x90\x80\x80",
	"ESC (C0)":                  "/x\x1b[31m",
	"newline (C0)":              "/x\nforged: line",
	"tab (C0)":                  "/x\ty",
	"DEL":                       "/x\x7f",
	"NEL U+0085 (C1)":           "/x\u0085",
	"CSI U+009B (C1)":           "/x\u009b",
	"PAD U+0080 (first C1)":     "/x\u0080",
	"APC U+009F (last C1)":      "/x\u009f",
	"invalid after valid runes": "/ação/\xfe",
	// Format characters (Cf) and separators: invisible or reordering on a
	// dashboard (issue 22 item 7).
	"RLO U+202E (bidi override)": "/x\u202etxt.exe",
	"LRE U+202A":                 "/x\u202a",
	"PDF U+202C":                 "/x\u202c",
	"RLI U+2067 (bidi isolate)":  "/x\u2067y",
	"PDI U+2069":                 "/x\u2069",
	"LRM U+200E":                 "/x\u200e",
	"RLM U+200F":                 "/x\u200f",
	"ZWSP U+200B":                "/ad\u200bmin",
	"ZWJ U+200D":                 "/x\u200d",
	"word joiner U+2060":         "/x\u2060",
	"BOM U+FEFF":                 "/\ufeffapi",
	"soft hyphen U+00AD":         "/ad\u00admin",
	"Arabic letter mark U+061C":  "/x\u061c",
	"tag U+E0041":                "/x\U000E0041",
	"interlinear U+FFF9":         "/x\ufff9",
	"line separator U+2028":      "/x\u2028y",
	"paragraph separator U+2029": "/x\u2029y",
}

// FuzzValidText: no text ValidText accepts holds invalid UTF-8, a control
// (Cc) or a format character (Cf), or a line or paragraph separator.
func FuzzValidText(f *testing.F) {
	for _, s := range hostileTexts {
		f.Add(s)
	}
	f.Add("/ação/matrícula")
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidText(s) {
			return
		}
		if !utf8.ValidString(s) {
			t.Fatalf("ValidText(%q) = true for invalid UTF-8", s)
		}
		for _, r := range s {
			if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.In(r, unicode.Zl, unicode.Zp) {
				t.Fatalf("ValidText(%q) = true with %U", s, r)
			}
		}
	})
}

func TestValidTextRefusesInvalidUTF8AndControls(t *testing.T) {
	t.Parallel()
	for name, s := range hostileTexts {
		if ValidText(s) {
			t.Errorf("%s: ValidText(%q) = true", name, s)
		}
	}
	for _, s := range []string{"", "/", "/api/alunos/{id}", "/ação/matrícula", "/日本語", "/emoji/\U0001F600", "/x y", "/~!$&'()*+,;=:@", "/\u00a1", "/~", "/한국어", "/Привет"} {
		if !ValidText(s) {
			t.Errorf("ValidText(%q) = false, want true", s)
		}
	}
}

// Fresh attack pass 7 T05: "/api/alunos" followed by a character that
// renders as nothing or a blank, yet is no control or format character,
// was its own key shown as "/api/alunos" on dashboards. Every such
// character the attack used, and their classes, is refused.
func TestValidTextRefusesInvisibleCharacters(t *testing.T) {
	t.Parallel()
	for _, r := range []rune{0x3164, 0x115F, 0x1160, 0xFFA0, 0x034F, 0x2800, 0x3000, 0x00A0, 0x2007, 0x202F, 0x205F, 0xFE0F, 0xFE00, 0xE0100, 0x17B4} {
		if s := "/api/alunos" + string(r); ValidText(s) {
			t.Errorf("ValidText(%q) = true (U+%04X)", s, r)
		}
	}
}

func invalidValues(t *testing.T, r *Recorder, dimension string) float64 {
	t.Helper()
	c := r.metrics.invalidEndpoint
	if dimension == "escola" {
		c = r.metrics.invalidEscola
	}
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A path that is not valid text never becomes a key: it counts as
// "{route}:other" and in borda_telemetry_invalid_values_total, and so does
// a template over 256 bytes. A bad escola_id is not counted per school.
func TestHostilePathsAndEscolaIDsNeverBecomeKeys(t *testing.T) {
	t.Parallel()
	ks := keyspace.MustNew("olp-dev:t:")
	sink := &memSink{}
	r, _ := newTestRecorder(t, testConfig(100), ks, sink)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	for _, p := range hostileTexts {
		r.Record(Event{Served: true, Time: at, Route: "portal", Path: p, Status: 200})
	}
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: strings.Repeat("/z", 150), Status: 200})
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/ação", Status: 200, Escola: "e\xff"})
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/ação", Status: 200, Escola: "e\u0085"})
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/ação", Status: 200, Escola: strings.Repeat("9", 300)})
	r.Record(Event{Served: true, Time: at, Route: "portal", Path: "/ação", Status: 200, Escola: "3141"})
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := int64(len(hostileTexts) + 1)
	want := map[string]int64{
		"olp-dev:t:m:portal:other:202603040506": n,
		"olp-dev:t:m:portal:/ação:202603040506": 4,
		"olp-dev:t:m:escola:3141:202603040506":  1,
		"olp-dev:t:m:status:200:202603040506":   n + 4,
	}
	for k, c := range want {
		if got := sink.get(k); got != c {
			t.Errorf("%s = %d, want %d", k, got, c)
		}
	}
	if len(sink.counts) != len(want) {
		t.Errorf("sink has %d keys, want %d: %v", len(sink.counts), len(want), sink.counts)
	}
	for k := range sink.counts {
		if !ValidText(k) {
			t.Errorf("key %q is not valid text", k)
		}
	}
	if got := invalidValues(t, r, "endpoint"); got != float64(n) {
		t.Errorf("invalid endpoint values = %v, want %d", got, n)
	}
	if got := invalidValues(t, r, "escola"); got != 3 {
		t.Errorf("invalid escola values = %v, want 3", got)
	}
}
