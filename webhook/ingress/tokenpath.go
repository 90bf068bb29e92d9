package ingress

import (
	"net/url"
	"strings"
)

// redactedSegment replaces a path segment that is, or may be, a token.
const redactedSegment = "[redacted]"

// cutBase reports whether the decoded request path p lies under the
// source path whose segments are base (its path split on "/", without the
// leading empty one), and returns the rest ("" or starting with "/").
// Segments are compared whole, and path parameters (";x" up to the
// segment's end) of a request segment are skipped, exactly as the
// gateway's router matches a prefix (gateway/pathmatch.go): it sends
// "/webhooks/whatsapp;x/t/TOKEN" here, so the ingress serves, and redacts,
// it as "/webhooks/whatsapp/t/TOKEN". fold compares ASCII case-insensitively
// (for redaction only: the router is case-sensitive).
func cutBase(p string, base []string, fold bool) (string, bool) {
	i := 0
	for _, seg := range base {
		if i >= len(p) || p[i] != '/' {
			return "", false
		}
		i++
		if len(p)-i < len(seg) {
			return "", false
		}
		if got := p[i : i+len(seg)]; got != seg && !(fold && strings.EqualFold(got, seg)) {
			return "", false
		}
		i += len(seg)
		if i < len(p) && p[i] == ';' {
			for i < len(p) && p[i] != '/' {
				i++
			}
		}
		if i < len(p) && p[i] != '/' {
			return "", false
		}
	}
	return p[i:], true
}

// baseSegments splits a source path ("/webhooks/whatsapp") into the
// segments cutBase compares.
func baseSegments(path string) []string {
	return strings.Split(strings.TrimPrefix(path, "/"), "/")
}

// tokenMarker reports whether a segment is, or reads as, the "t" that
// introduces a path token to some parser: "t" in any letter case, with
// path parameters ("t;x"), percent-encoded ("%74"), or with dots or
// spaces around it (".t", "t.": Windows and some frameworks trim them).
// Only "t" itself is accepted as the token form (parseTarget); every
// spelling here is redacted, so a token a provider sends in a spelling the
// ingress refuses still never reaches a log line or a telemetry key.
func tokenMarker(seg string) bool {
	if len(seg) == 0 || len(seg) > 32 {
		return false
	}
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		seg = seg[:i]
	}
	if strings.IndexByte(seg, '%') >= 0 {
		if u, err := url.PathUnescape(seg); err == nil {
			seg = u
		}
	}
	seg = strings.Trim(seg, ". \t")
	return seg == "t" || seg == "T"
}

// tokenSegments marks the segments of segs (a path split on "/") that are
// or may be a token: the first non-empty segment after each tokenMarker,
// every segment after that token when more than one non-empty segment
// follows it (the path form is "/t/{token}[/{event}]": a longer tail may
// be a token that held a "/", or the token again), the one segment that
// follows it when it is no event name (eventName), and any segment equal
// to a marked one. It returns nil when none is.
func tokenSegments(segs []string) []bool {
	var marked []bool
	for k := 0; k < len(segs); k++ {
		if !tokenMarker(segs[k]) {
			continue
		}
		j := k + 1
		for j < len(segs) && segs[j] == "" {
			j++
		}
		if j >= len(segs) {
			break
		}
		if marked == nil {
			marked = make([]bool, len(segs))
		}
		marked[j] = true
		tail := 0
		for n := j + 1; n < len(segs); n++ {
			if segs[n] != "" {
				tail++
			}
		}
		if tail > 1 {
			for n := j + 1; n < len(segs); n++ {
				marked[n] = segs[n] != "" && !tokenMarker(segs[n])
			}
			break
		}
		// One segment after the token: the event ("messages-upsert"),
		// or the token's tail when the token held a "/" (fresh attack
		// pass 7 W09: "/t/<20 chars>%2F<13 chars>" logged the last 13).
		// An event name is letters, '-', '_' and '.'; anything else is
		// taken for the token's tail.
		for n := j + 1; n < len(segs); n++ {
			if segs[n] != "" && !tokenMarker(segs[n]) && !eventName(segs[n]) {
				marked[n] = true
			}
		}
		k = j
	}
	if marked == nil {
		return nil
	}
	if len(segs) > 64 { // bound the pairwise pass: mark everything
		for n, s := range segs {
			marked[n] = s != "" && !tokenMarker(s)
		}
		return marked
	}
	for n, s := range segs {
		if marked[n] {
			continue
		}
		for m, t := range segs {
			if marked[m] && s != "" && sameCore(s, t) {
				marked[n] = true
			}
		}
	}
	return marked
}

// eventName reports whether seg reads as an event name of the path form
// ("messages-upsert", "CONNECTION_UPDATE"): only ASCII letters, '-', '_'
// and '.', at most 64 of them.
func eventName(seg string) bool {
	if len(seg) > maxEventName {
		return false
	}
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// sameCore reports whether segments a and b hold the same value once
// parameters, dots and spaces around it are cut, or (6 bytes or more) one
// holds the other.
func sameCore(a, b string) bool {
	if a == b {
		return true
	}
	a, b = strings.Trim(paramless(a), ". \t"), strings.Trim(paramless(b), ". \t")
	if a == "" || b == "" {
		return false
	}
	return a == b || (len(a) >= 6 && len(b) >= 6 && (strings.Contains(a, b) || strings.Contains(b, a)))
}

// paramless is seg without its path parameters.
func paramless(seg string) string {
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		return seg[:i]
	}
	return seg
}

// redactTokenPath returns the decoded request path p fit for a log line,
// a telemetry key and gateway_metrics when it lies under one of bases
// (source paths as baseSegments, longest first; case folded): the
// source's own path, then the rest with every tokenSegments segment
// replaced by "[redacted]" and every path parameter by ";[redacted]" (a
// parameter may carry a credential too). Any other path is returned as
// it is. It allocates only for a path it changes.
//
// eventMax is the longest segment kept as an event name: the Ingress
// passes knownTokens.eventMax (shorter than its shortest token, unless
// that is under minEventMax), so a segment that could hold a token glued
// to letters is not printed (fresh attack pass 10, A09: a token of letters
// and '-' glued to letters read as an event name).
func redactTokenPath(p string, bases [][]string, paths []string, eventMax int) string {
	for n, base := range bases {
		rest, ok := cutBase(p, base, true)
		if !ok {
			continue
		}
		clean := strings.IndexByte(p, ';') < 0 && !strings.Contains(p, "//") && p[:len(p)-len(rest)] == paths[n]
		if clean && !hasTokenMarker(rest) && onlyEventNames(rest, eventMax) {
			return p // the common case, without allocating
		}
		segs := strings.Split(rest, "/")
		marked := tokenSegments(segs)
		for k, s := range segs {
			switch {
			case marked != nil && marked[k], opaque(s, eventMax):
				segs[k] = redactedSegment
			case strings.IndexByte(s, ';') >= 0:
				segs[k] = paramless(s) + ";" + redactedSegment
			}
		}
		return paths[n] + strings.Join(segs, "/")
	}
	return p
}

// opaque reports whether a segment under a source's path is neither a
// token marker nor an event name: the ingress serves no such path, and
// it may hold a token glued to other characters ("xTOKEN", "TOKEN,1",
// "token=TOKEN": fresh attack pass 8 L02), which the digests of the
// configured tokens cannot find. Such a segment is never logged.
func opaque(seg string, eventMax int) bool {
	seg = paramless(seg)
	return seg != "" && !tokenMarker(seg) && (!eventName(seg) || len(seg) > eventMax)
}

// onlyEventNames reports whether no segment of rest is opaque, without
// allocating.
func onlyEventNames(rest string, eventMax int) bool {
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, "/")
		if opaque(seg, eventMax) {
			return false
		}
	}
	return true
}

// hasTokenMarker reports whether a segment of rest is a tokenMarker,
// without allocating.
func hasTokenMarker(rest string) bool {
	for rest != "" {
		var seg string
		seg, rest, _ = strings.Cut(rest, "/")
		if tokenMarker(seg) {
			return true
		}
	}
	return false
}

// RedactPath returns a request path fit for access logs, telemetry keys
// and gateway_metrics: under a source's path (compared as the router
// does, in any letter case), the token of the path form and every
// spelling that reads as one is replaced by "[redacted]"
// (redactTokenPath): "/webhooks/whatsapp/t/abc/messages-upsert" →
// "/webhooks/whatsapp/t/[redacted]/messages-upsert", and so are
// "/webhooks/whatsapp;x/t/abc", "/webhooks/whatsapp/.t/abc",
// "/webhooks/whatsapp/T;x/abc" and "/Webhooks/WhatsApp/t/abc". Other paths
// are returned unchanged. (Query strings carry ?token= too: never log
// them.) Under a source's path every segment that is neither a token
// marker nor an event name is "[redacted]" as well (opaque): a token
// glued to other characters cannot be found by its digest.
//
// Beyond those spellings, every segment of any path that is a configured
// token (whole, without its ";params", or with dots and spaces around it
// cut) is replaced by "[redacted]" wherever it sits (attack A74:
// "/webhooks/whatsapp/TOKEN" without the "/t/", "/token/TOKEN", a path
// prefix in front of the source, "/x/webhooks/whatsapp/t/TOKEN" on the
// portal's route). The ingress holds only the tokens' digests, so a
// segment is compared as the credential check compares one: its SHA-256
// against every configured digest; only segments as long as some token
// are hashed.
func (i *Ingress) RedactPath(p string) string {
	return i.known.redact(redactTokenPath(p, i.bases, i.paths, i.known.eventMax()))
}

// knownTokens are every source's tokens, for RedactPath.
type knownTokens struct {
	set            tokenSet
	minLen, maxLen int
}

func newKnownTokens(srcs []Source) knownTokens {
	var k knownTokens
	for _, s := range srcs {
		for _, t := range s.Tokens {
			if t == "" {
				continue
			}
			k.set = append(k.set, newTokenSet([]string{t})...)
			if k.minLen == 0 || len(t) < k.minLen {
				k.minLen = len(t)
			}
			k.maxLen = max(k.maxLen, len(t))
		}
	}
	return k
}

// maxEventName is the longest segment under a source's path that may be
// printed as an event name.
const maxEventName = 64

// minEventMax is the shortest eventMax: most event names of Evolution
// and its peers ("messages-upsert", "CONNECTION_UPDATE") are 24 characters
// or fewer, and production refuses tokens shorter than 32 bytes, so there
// eventMax is 31 and every Evolution event name ("group-participants-
// update", 25) prints.
const minEventMax = 24

// eventMax is the longest segment under a source's path printed as an
// event name: shorter than every token (so no printed segment can hold
// one, glued to letters or in another case), but never below minEventMax
// (with a development token shorter than that, refused in production, a
// short glued token may still print), and at most maxEventName.
func (k knownTokens) eventMax() int {
	if k.minLen == 0 {
		return maxEventName
	}
	return min(maxEventName, max(minEventMax, k.minLen-1))
}

// maxRedactSegments bounds the segments of one path compared with the
// tokens (a path of thousands of segments costs no more than this); the
// segments past it are never compared, so they are never printed either:
// they become one redactedSegment (fresh attack pass A060: a token as the
// 66th segment reached the access log).
const maxRedactSegments = 64

// redact replaces every segment of p that is a known token, and the
// segments past maxRedactSegments as a whole. It allocates only for a path
// it changes.
func (k knownTokens) redact(p string) string {
	if len(k.set) == 0 {
		return p
	}
	var segs []string
	idx, off := 0, 0 // the segment rest starts with, and where in p
	rest := p
	for n := 0; rest != "" && n < maxRedactSegments; n++ {
		seg, after, found := strings.Cut(rest, "/")
		if k.isToken(seg) {
			if segs == nil {
				segs = strings.Split(p, "/")
			}
			segs[idx] = redactedSegment
		}
		if !found {
			rest = ""
			break
		}
		rest, idx, off = after, idx+1, off+len(seg)+1
	}
	if rest != "" {
		// Past the bound: the unexamined tail becomes one redacted segment.
		head := p[:off]
		if segs != nil {
			head = strings.Join(segs[:idx], "/") + "/"
		}
		return head + redactedSegment
	}
	if segs == nil {
		return p
	}
	return strings.Join(segs, "/")
}

// isToken reports whether seg, or its core (no ";params", dots and spaces
// around cut), is a known token.
func (k knownTokens) isToken(seg string) bool {
	for _, c := range []string{seg, paramless(seg), strings.Trim(paramless(seg), ". \t")} {
		if len(c) >= k.minLen && len(c) <= k.maxLen && k.set.match(c) {
			return true
		}
	}
	return false
}

func isMarked(marked []bool, k int) bool { return marked != nil && marked[k] }
