package configs

import (
	"encoding/base64"
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

// showURL quotes a URL setting for a validation message, redacted
// (redact.URL): a value that failed to parse is redacted as if it were a
// URL, so "user:secret@host" (no scheme) does not print "secret" either.
func showURL(raw string) string {
	if strings.Contains(raw, "://") {
		return strconv.Quote(redact.URL(raw))
	}
	return strconv.Quote(strings.TrimPrefix(redact.URL("x://"+raw), "x://"))
}

// signingSecrets reads a webhook source's signing secrets: the variable
// named by secretEnv (for github its whole trimmed value is one secret;
// for stripe and standard it is split on commas, which their secret
// alphabets never hold), then each variable of secretEnvs as one whole
// secret. Unset or empty variables add nothing.
func signingSecrets(scheme, secretEnv string, secretEnvs []string, lookup func(string) (string, bool)) Secrets {
	var out Secrets
	one := func(name string) (string, bool) {
		if name == "" {
			return "", false
		}
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	if v, ok := one(secretEnv); ok {
		if scheme == "github" {
			out = append(out, Secret(v))
		} else {
			out = append(out, splitSecrets(v)...)
		}
	}
	for _, name := range secretEnvs {
		if v, ok := one(name); ok {
			out = append(out, Secret(v))
		}
	}
	return out
}

// unsetVariables returns the names among names (empty names skipped)
// whose variable is unset or blank.
func unsetVariables(names []string, lookup func(string) (string, bool)) []string {
	var out []string
	for _, name := range names {
		if name == "" {
			continue
		}
		if v, ok := lookup(name); !ok || strings.TrimSpace(v) == "" {
			out = append(out, name)
		}
	}
	return out
}

// usableSigningSecret reports whether the ingress can verify with secret:
// not blank, and for the standard scheme "whsec_" (optional) and the
// base64 of a non-empty key (webhook/ingress StandardKey decides the
// same; an empty key is one anyone can sign with).
func usableSigningSecret(scheme, secret string) bool {
	secret = strings.TrimSpace(secret)
	if secret == "" {
		return false
	}
	if scheme != "standard" {
		return true
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	return err == nil && len(k) > 0
}
