package configs

import (
	"strconv"
	"strings"

	"github.com/olp-edu/borda/internal/redact"
)

// Secret holds a credential (token, password, HMAC key). It never prints:
// String, GoString and MarshalYAML all return "[redacted]" (or "" when
// empty), so a Secret can be logged or dumped by `borda config check`
// without leaking. Call Reveal to use the value.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// String redacts.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString redacts (for %#v).
func (s Secret) GoString() string { return s.String() }

// MarshalYAML redacts.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalText redacts (encoding/json, slog's JSON handler, any text
// encoder).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Secrets is a list of credentials, for rotation (several accepted at once).
type Secrets []Secret

// MarshalYAML redacts every element.
func (s Secrets) MarshalYAML() (any, error) {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = v.String()
	}
	return out, nil
}

// RedactURL is redact.URL: raw with every URL secret replaced by "xxxxx".
func RedactURL(raw string) string { return redact.URL(raw) }

// RedactURLs is redact.URLs: text with every URL in it redacted.
func RedactURLs(text string) string { return redact.URLs(text) }

// RedactError is redact.Error: err with every URL in its text redacted,
// still in its chain.
func RedactError(err error) error { return redact.Error(err) }

// URLSecrets is redact.URLSecrets: the secret parts of a URL, raw and
// percent-decoded, each at least 6 bytes long.
func URLSecrets(raw string) []string { return redact.URLSecrets(raw) }

// ScrubSecrets is redact.Scrub: text with each secret and its URLs
// redacted.
func ScrubSecrets(text string, secrets []string) string { return redact.Scrub(text, secrets) }

// showURL quotes a URL setting for a validation message, redacted
// (RedactURL): a value that failed to parse is redacted as if it were a
// URL, so "user:secret@host" (no scheme) does not print "secret" either.
func showURL(raw string) string {
	if strings.Contains(raw, "://") {
		return strconv.Quote(RedactURL(raw))
	}
	return strconv.Quote(strings.TrimPrefix(RedactURL("x://"+raw), "x://"))
}
