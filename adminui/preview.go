package adminui

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PreviewBytes bounds a body preview.
const PreviewBytes = 600

// secretMembers are JSON member names whose values a preview never shows,
// at any depth, compared case-insensitively with '_' and '-' removed:
// credentials the providers put in their bodies (Evolution's apikey),
// and media payloads (base64, thumbnails) that are noise on a page.
var secretMembers = []string{"apikey", "token", "accesstoken", "password", "secret", "authorization", "base64", "jpegthumbnail", "mediakey"}

func secretMember(name string) bool {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(name))
	for _, s := range secretMembers {
		if n == s || strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// Preview is an event body for the page: a JSON body compacted with the
// values of secret-named members (secretMembers) replaced by
// "[redacted]"; any other body as text; then every URL's secrets removed
// by redactURLs, control characters and invalid UTF-8 shown as '?', and
// the result cut to PreviewBytes with "…".
func Preview(body []byte, redactURLs func(string) string) string {
	text := ""
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err == nil && !dec.More() {
		v = redactJSON(v)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) == nil {
			text = strings.TrimSpace(buf.String())
		}
	}
	if text == "" {
		text = string(body[:min(len(body), 4*PreviewBytes)])
	}
	if redactURLs != nil {
		text = redactURLs(text)
	}
	return cut(printableText(text), PreviewBytes)
}

func redactJSON(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if secretMember(k) {
				t[k] = "[redacted]"
			} else {
				t[k] = redactJSON(val)
			}
		}
	case []any:
		for i := range t {
			t[i] = redactJSON(t[i])
		}
	}
	return v
}

func printableText(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		s = s[n:]
		switch {
		case r == utf8.RuneError && n <= 1, !unicode.IsPrint(r) && r != ' ':
			if unicode.IsSpace(r) {
				b.WriteByte(' ')
			} else {
				b.WriteByte('?')
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cut keeps at most n bytes of s on a rune boundary, marking a cut "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
