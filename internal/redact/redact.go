// Package redact removes the secrets a URL can carry (password, query
// values, fragment) from URLs and from the texts of errors that embed
// them, for the process log and every error that reaches a header or a
// body (docs/configuration.md, secrets). It is a leaf: configs, the
// stores and the identity verifier share it.
package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// redactedPart replaces a URL password, query value or fragment, as
// net/url's URL.Redacted writes a password.
const redactedPart = "xxxxx"

// URL returns raw with every secret a URL can hold replaced by
// "xxxxx": the password of the userinfo (the user name is kept:
// "amqp://guest:xxxxx@host/"), a user name given alone (it is a token:
// "https://xxxxx@host/"), every query value ("?token=xxxxx&v=xxxxx"; a
// bare query part "?abc" becomes "?xxxxx") and the fragment. Scheme, host,
// port and path are kept, so an operator still sees where it points;
// docs/configuration.md ("Secrets in URLs") asks for secrets never to be
// put in a path. raw need not parse: the redaction is lexical, and an
// ambiguous userinfo (an unescaped '/', '?' or '#' before the last '@') is
// redacted whole. Text without "://" is returned as given.
func URL(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	var b strings.Builder
	b.Grow(len(raw))
	b.WriteString(raw[:i+3])
	rest := raw[i+3:]
	queryAt := strings.IndexAny(rest, "?#")
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		userinfo := rest[:at]
		switch user, _, hasPassword := strings.Cut(userinfo, ":"); {
		case strings.ContainsAny(userinfo, "/?#"):
			b.WriteString(redactedPart) // '@' in the path or query, or an unescaped password: say nothing
		case hasPassword:
			b.WriteString(user + ":" + redactedPart)
		case userinfo != "":
			b.WriteString(redactedPart)
		}
		b.WriteByte('@')
		rest = rest[at+1:]
		queryAt = strings.IndexAny(rest, "?#")
	} else {
		// No '@': an authority "host:port" whose port is not a number is
		// a userinfo cut short (text quoted by %q ends at an escaped
		// quote inside a password).
		authority := rest
		if end := strings.IndexAny(rest, "/?#"); end >= 0 {
			authority = rest[:end]
		}
		if c := strings.LastIndexByte(authority, ':'); c >= 0 && !strings.HasSuffix(authority, "]") && !allDigits(authority[c+1:]) {
			b.WriteString(authority[:c+1] + redactedPart)
			rest = rest[len(authority):]
			queryAt = strings.IndexAny(rest, "?#")
		}
	}
	if queryAt < 0 {
		b.WriteString(rest)
		return b.String()
	}
	b.WriteString(rest[:queryAt])
	rest = rest[queryAt:]
	if rest[0] == '?' {
		query, fragment, hasFragment := strings.Cut(rest[1:], "#")
		b.WriteByte('?')
		for j, part := range strings.Split(query, "&") {
			if j > 0 {
				b.WriteByte('&')
			}
			if key, _, ok := strings.Cut(part, "="); ok {
				b.WriteString(key + "=" + redactedPart)
			} else if part != "" {
				b.WriteString(redactedPart)
			}
		}
		if !hasFragment {
			return b.String()
		}
		rest = "#" + fragment
	}
	if len(rest) > 1 {
		b.WriteString("#" + redactedPart)
	} else {
		b.WriteString(rest)
	}
	return b.String()
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// urlInText finds the URLs in free text (an error message, a log line):
// a scheme, "://", and everything up to a space, a quote or an angle
// bracket; a backslash escape (%q's \") does not end it.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://(?:[^\s"'<>\x60\\]|\\.)+`)

// URLs returns text with every URL in it passed through URL:
// for error texts of libraries that embed the URL they were given
// (net/http's *url.Error: `Post "https://u:xxxxx@host/?token=xxxxx": …`,
// JWKS and AMQP dial errors) and for the process log, whose handler runs
// every string through it (cmd/borda newLogger).
func URLs(text string) string {
	if !strings.Contains(text, "://") {
		return text
	}
	return urlInText.ReplaceAllStringFunc(text, URL)
}

// Error returns err with every URL in its text redacted (URLs),
// or err itself when its text holds none. The result keeps err in its
// chain (errors.Is and errors.As still see net errors and deadlines); only
// Error() changes. Use it at each client boundary whose errors reach a log,
// a header or an HTTP body: net/http's *url.Error carries the full URL.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := URLs(msg)
	if red == msg {
		return err
	}
	return &redactedError{msg: red, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// credentialParam finds a credential-named parameter in free text: a name
// holding token, password/passwd/pwd, secret, api key, authorization,
// credential, session id or signature (any letter case, any prefix or
// suffix: access_token, client_secret, X-Api-Key, db.password), then "="
// or ":" with optional quotes (plain, JSON's, or escaped as %q writes
// them) and spaces, an optional auth scheme (Bearer, Basic, Token), and
// the value, up to a space, quote, delimiter or backslash.
var credentialParam = regexp.MustCompile(`(?i)([a-z0-9_.\-]*(?:token|passw(?:or)?d|pwd|secret|api[_\-]?key|authorization|credential|session[_\-]?id|signature)[a-z0-9_.\-]*)(\\?"?\s*[:=]\s*\\?"?)((?:bearer|basic|token)\s+)?([^\s"'&,;<>{}\[\]\\]+)`)

// Params returns text with the value of every credential-named parameter
// replaced by "xxxxx" ("token=abc" → "token=xxxxx", `"password": "p"` →
// `"password": "xxxxx"`, "Authorization: Bearer t" → "Authorization:
// Bearer xxxxx"), for text a remote party wrote (a legacy endpoint's
// reply excerpt) that reaches logs and dead letters. Names are kept, so
// an operator still sees what was there.
func Params(text string) string {
	idx := credentialParam.FindAllStringSubmatchIndex(text, -1)
	if idx == nil {
		return text
	}
	var sb strings.Builder
	last := 0
	for _, m := range idx {
		vStart, vEnd := m[8], m[9] // the value group
		if text[vStart:vEnd] == redactedPart {
			continue
		}
		sb.WriteString(text[last:vStart])
		sb.WriteString(redactedPart)
		last = vEnd
	}
	sb.WriteString(text[last:])
	return sb.String()
}

// minScrubbed is the shortest URL secret Secrets removes from
// free text: shorter values ("v=2") would blank unrelated words.
const minScrubbed = 6

// URLSecrets returns the secret parts of a URL, as URL finds them
// (password, a lone user name, query values, fragment), raw and
// percent-decoded, each at least 6 bytes long. A component that talks to
// that URL removes them from text the other side wrote back (a legacy
// endpoint that echoes its request line in an error body), with
// Secrets.
func URLSecrets(raw string) []string {
	var out []string
	add := func(v string) {
		for _, s := range []string{v, unescape(v)} {
			if len(s) >= minScrubbed && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	i := strings.Index(raw, "://")
	if i < 0 {
		return nil
	}
	rest := raw[i+3:]
	if at := strings.LastIndexByte(rest, '@'); at >= 0 && !strings.ContainsAny(rest[:at], "/?#") {
		if user, pass, ok := strings.Cut(rest[:at], ":"); ok {
			add(pass)
		} else {
			add(user)
		}
		rest = rest[at+1:]
	}
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		query, fragment, _ := strings.Cut(rest[q:], "#")
		for _, part := range strings.Split(strings.TrimPrefix(query, "?"), "&") {
			if _, v, ok := strings.Cut(part, "="); ok {
				add(v)
			} else {
				add(part)
			}
		}
		add(fragment)
	}
	return out
}

func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// Secrets returns text with every occurrence of each secret replaced by
// "xxxxx", and its URLs redacted (URLs): for text the other side of a
// connection wrote back (a reply excerpt), which may echo the request.
func Secrets(text string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			text = strings.ReplaceAll(text, s, redactedPart)
		}
	}
	return URLs(text)
}
