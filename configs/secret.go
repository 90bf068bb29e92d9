package configs

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
