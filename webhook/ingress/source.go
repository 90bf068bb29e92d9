package ingress

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Source is one webhook source: a path (with its sub-paths), the
// credentials that authenticate it, how its event id is found and where
// its events go.
type Source struct {
	// Name names the source in envelopes, logs and metrics.
	Name string
	// Path is the URL path prefix served ("/webhooks/whatsapp" and
	// "/webhooks/whatsapp/…").
	Path string
	// RoutingKey of its events on the publisher's exchange (empty: the
	// publisher's default).
	RoutingKey string
	// Tokens are the accepted credentials (several during a rotation);
	// empty: no token required (then Signature is).
	Tokens []string
	// Signature, when set, is verified over the raw body.
	Signature *Signature
	// IDFields are the dotted body paths whose values, joined with ":",
	// identify an event when no delivery-id header is present.
	IDFields []string
	// RedactFields are top-level JSON members removed before publishing.
	RedactFields []string
	// Sender is written into every envelope of the source
	// (envelope.Envelope.Sender): the credential group that admits it
	// (configs.Webhook.CredentialGroups). Empty: the source's Name.
	Sender string
	// NotConfigured, when set, is why the configuration cannot serve this
	// source (an unset tokens_env, a signing secret missing or
	// undecodable): the source answers 503 NOT_CONFIGURED and every other
	// source keeps working (attack B32). It names variables, never values.
	NotConfigured error
}

// Signature is a provider's signature scheme over the raw body.
type Signature struct {
	// Scheme is github, stripe or standard (Standard Webhooks).
	Scheme string
	// Secrets are the signing secrets (several during a rotation; a
	// standard secret is "whsec_" + base64).
	Secrets []string
	// Tolerance bounds the signed timestamp's age (stripe, standard).
	Tolerance time.Duration
}

// source is one compiled webhook source.
type source struct {
	name       string
	sender     string // envelope.Envelope.Sender
	path       string
	segs       []string // baseSegments(path)
	routingKey string
	tokens     tokenSet // empty: no token required (signature-only source)
	sig        verifier // nil: unsigned
	idFields   [][]string
	// idHeaders and idFallback: where a signed source's event id may come
	// from besides idFields (eventid.go, idOf).
	idHeaders  []string
	idFallback [][]string
	redact     []string
	// broken, when set, is why the source cannot serve: it answers 503
	// NOT_CONFIGURED, alone (compileSources).
	broken error
}

// compileSources compiles srcs, longest path first. A source must be
// authenticated: by tokens, by a signature, or both; one with neither, or
// whose signature secret cannot be decoded, or whose NotConfigured is set,
// is compiled broken: it answers 503 NOT_CONFIGURED and nothing else
// changes (a source's mistake stays that source's, attack B32), so an
// ingress never accepts everything. The error joins the broken sources'
// reasons; the sources are returned whatever it is.
func compileSources(srcs []Source) ([]*source, error) {
	var out []*source
	var errs []error
	for _, c := range srcs {
		var mine []error
		if c.NotConfigured != nil {
			mine = append(mine, c.NotConfigured)
		}
		sender := c.Sender
		if sender == "" {
			sender = c.Name
		}
		s := &source{
			name:       c.Name,
			sender:     sender,
			path:       c.Path,
			segs:       baseSegments(c.Path),
			routingKey: c.RoutingKey,
			tokens:     newTokenSet(c.Tokens),
			idFields:   splitFields(c.IDFields),
			redact:     c.RedactFields,
		}
		if c.Signature != nil {
			v, err := newVerifier(c.Signature.Scheme, c.Signature.Secrets, c.Signature.Tolerance)
			if err != nil {
				mine = append(mine, fmt.Errorf("signature (%s): %w", c.Signature.Scheme, err))
			}
			s.sig = v
			s.idHeaders = signedIDHeaders[c.Signature.Scheme]
			s.idFallback = signedFallbackFields[c.Signature.Scheme]
		}
		if len(s.tokens) == 0 && c.Signature == nil && c.NotConfigured == nil {
			mine = append(mine, errors.New("no token and no signature; refusing to accept unauthenticated webhooks"))
		}
		if err := errors.Join(mine...); err != nil {
			s.broken = fmt.Errorf("source %q: %w", c.Name, err)
			errs = append(errs, s.broken)
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].path) > len(out[j].path) })
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("compiling webhook sources: %w", err)
	}
	return out, nil
}

// matchSource returns the source whose path is urlPath or a parent of it,
// as the gateway's router matches it (cutBase: whole segments, ";params"
// skipped), and the rest of the path ("" or starting with "/").
func matchSource(sources []*source, urlPath string) (*source, string) {
	for _, s := range sources {
		if rest, ok := cutBase(urlPath, s.segs, false); ok {
			return s, rest
		}
	}
	return nil, ""
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

// sourceBases returns each source's segs, in order.
func sourceBases(sources []*source) [][]string {
	out := make([][]string, len(sources))
	for n, s := range sources {
		out[n] = s.segs
	}
	return out
}

// sourcePaths returns each source's path, in order.
func sourcePaths(sources []*source) []string {
	out := make([]string, len(sources))
	for n, s := range sources {
		out[n] = s.path
	}
	return out
}
