package webhook

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/olp-edu/borda/configs"
)

// FlatSourceName names the source of the flat webhook section
// (docs/webhooks.md §8) in envelopes, logs and metrics.
const FlatSourceName = "whatsapp"

// Enabled reports whether cfg configures any webhook source (webhook.path
// or webhook.sources); when it does not, the ingress is off and
// NewIngress would return an error.
func Enabled(w configs.Webhook) bool { return w.Path != "" || len(w.Sources) > 0 }

// source is one compiled webhook source.
type source struct {
	name       string
	path       string
	routingKey string
	tokens     tokenSet // empty: no token required (signature-only source)
	sig        verifier // nil: unsigned
	idFields   [][]string
	redact     []string
}

// compileSources turns the flat webhook section and webhook.sources into
// sources, longest path first. A source must be authenticated: by tokens
// (tokens_env, else WEBHOOK_TOKENS), by a signature, or both; one with
// neither is an error, so an ingress never accepts everything.
func compileSources(w configs.Webhook) ([]*source, error) {
	var out []*source
	var errs []error
	if w.Path != "" {
		s := &source{
			name:       FlatSourceName,
			path:       w.Path,
			routingKey: w.RoutingKey,
			tokens:     newTokenSet(reveal(w.Tokens)),
			idFields:   splitFields(w.IDFields),
		}
		if len(s.tokens) == 0 {
			errs = append(errs, errors.New("webhook.path: no token configured (set WEBHOOK_TOKENS); refusing to accept unauthenticated webhooks"))
		}
		out = append(out, s)
	}
	for i, c := range w.Sources {
		field := fmt.Sprintf("webhook.sources[%d]", i)
		s := &source{
			name:       c.Name,
			path:       c.Path,
			routingKey: c.RoutingKey,
			idFields:   splitFields(w.IDFields),
			redact:     c.RedactFields,
		}
		if s.routingKey == "" {
			s.routingKey = w.RoutingKey
		}
		if c.IDFields != nil {
			s.idFields = splitFields(c.IDFields)
		}
		switch {
		case c.TokensEnv != "":
			s.tokens = newTokenSet(reveal(c.Tokens))
			if len(s.tokens) == 0 {
				errs = append(errs, fmt.Errorf("%s.tokens_env: %s is empty or unset", field, c.TokensEnv))
			}
		case c.Signature == nil:
			s.tokens = newTokenSet(reveal(w.Tokens))
			if len(s.tokens) == 0 {
				errs = append(errs, fmt.Errorf("%s: no tokens_env, no signature and WEBHOOK_TOKENS unset; refusing to accept unauthenticated webhooks", field))
			}
		}
		if c.Signature != nil {
			v, err := newVerifier(c.Signature.Scheme, reveal(c.Signature.Secrets), c.Signature.Tolerance.D())
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.signature (%s): %w", field, c.Signature.SecretEnv, err))
			}
			s.sig = v
		}
		out = append(out, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("compiling webhook sources: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].path) > len(out[j].path) })
	return out, nil
}

// match returns the source whose path is urlPath or a parent of it, and
// the rest of the path ("" or starting with "/").
func matchSource(sources []*source, urlPath string) (*source, string) {
	for _, s := range sources {
		if rest, ok := strings.CutPrefix(urlPath, s.path); ok && (rest == "" || rest[0] == '/') {
			return s, rest
		}
	}
	return nil, ""
}

func reveal(ss configs.Secrets) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Reveal())
	}
	return out
}

func splitFields(fields []string) [][]string {
	out := make([][]string, 0, len(fields))
	for _, f := range fields {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, strings.Split(f, "."))
		}
	}
	return out
}
