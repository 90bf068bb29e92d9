package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/olp-edu/borda/cookies"
)

// MaxFormTokenBody is the most bytes of an application/x-www-form-urlencoded
// request body the gateway reads to find an RFC 6750 §2.2 access_token
// (identifyFormToken): 64 KiB. A larger form body on a route where a user
// or escola rule applies is refused 413 (problemFormTooLarge): the gateway
// cannot know whose token it carries without holding it all. 64 KiB × the
// default 4 096 connections bounds the memory at 256 MiB.
const MaxFormTokenBody = 64 << 10

// Form-body refusals (PT-BR, docs/edge.md, Identity).
var (
	problemFormTooLarge = problem{Title: "Formulário grande demais", Status: http.StatusRequestEntityTooLarge,
		Detail: "O corpo application/x-www-form-urlencoded excede 64 KiB. Envie dados grandes como multipart/form-data ou JSON."}
	problemFormEncoded = problem{Title: "Formulário com codificação não suportada", Status: http.StatusUnsupportedMediaType,
		Detail: "O corpo application/x-www-form-urlencoded deve ser enviado sem Content-Encoding (sem gzip, deflate ou br)."}
)

// identityKeyer is implemented by a Limiter that tells whether a rule on
// a route keys on the verified identity (*ratelimit.Limiter).
type identityKeyer interface {
	KeysIdentity(route string) bool
}

// keysIdentity reports whether a user or escola rule applies to route:
// false without a limiter, true for a Limiter that cannot tell.
func (s *Server) keysIdentity(route string) bool {
	if s.limiter == nil {
		return false
	}
	if k, ok := s.limiter.(identityKeyer); ok {
		return k.KeysIdentity(route)
	}
	return true
}

// identifyFormToken makes the limiter count the user an RFC 6750 §2.2
// form-body token authenticates at the upstream (fresh attack pass 2
// A10: access_token in an urlencoded body was anonymous to the limiter
// while the upstream took it as the user's). It reads the body only when
// the request has one, a user or escola rule applies to the route, and
// an upstream would parse the body as a form (formEncoded). The body is
// read up to MaxFormTokenBody, under the route's body deadlines, and
// handed on to the upstream byte for byte. Every pair whose key a
// modelled parser reads as access_token (isQueryTokenKey; '&' and ';'
// separators) is a candidate: two different ones, or one that differs
// from the header, cookie or query credential, are refused 400 like any
// two credentials; alone, it is the identity when it verifies. A larger
// body is 413 and a compressed one 415 (Express's body-parser inflates
// gzip, deflate and br). Content-Type and Content-Encoding are read as the
// upstream receives them (cookies.ForwardedHeader: the lines a Connection
// header names removed). It reports whether the request goes on.
func (s *Server) identifyFormToken(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	if ex.w.body == nil {
		return true
	}
	// A route that forwards no session reads the form too, even without
	// an identity rule, so that dropPortalCredential can take the
	// portal's token out of it (fresh attack pass 8 B01: a third-party
	// route with per-IP rules only got "access_token=<JWT>" verbatim).
	keys := s.keysIdentity(ex.route.Name)
	strip := ex.route != nil && !ex.route.session && s.verifier != nil
	if !keys && !strip {
		return true
	}
	// The upstream's view: Content-Type and Content-Encoding lines a
	// Connection line names never reach it (fresh attack pass 3 C13).
	fwd := cookies.ForwardedHeader(r.Header)
	if !formEncoded(r.Method, fwd) {
		return true
	}
	if !identityCoding(fwd["Content-Encoding"]) {
		s.refuseCredential(w, r, ex, problemFormEncoded)
		return false
	}
	if r.ContentLength > MaxFormTokenBody {
		s.refuseCredential(w, r, ex, problemFormTooLarge)
		return false
	}
	// The read is bounded as the transport's read of the body is: the
	// body deadlines, and the route timeout (which the proxy arms again
	// for the upstream's answer).
	ex.body.arm(s.bodyTimeout, s.bodyMinRate)
	if ex.route.timeout > 0 {
		ex.timer = armRouteTimer(ex, ex.route.timeout)
	}
	stop := context.AfterFunc(r.Context(), ex.body.stop)
	buf, err := io.ReadAll(io.LimitReader(r.Body, MaxFormTokenBody+1))
	stop()
	timedOut := ex.stopTimer()
	if err != nil {
		s.refuseBody(w, r, ex, err, timedOut)
		return false
	}
	if len(buf) > MaxFormTokenBody {
		s.refuseCredential(w, r, ex, problemFormTooLarge)
		return false
	}
	r.Body = &replayedBody{Reader: bytes.NewReader(buf), body: &ex.body}
	ex.formBody = buf
	raw := string(buf)
	if !mayHoldQueryToken(raw) {
		return true
	}
	if !keys {
		s.findPortalFormToken(raw, ex)
		return true
	}
	token, ok := oneTokenValue(raw)
	if !ok {
		s.refuseCredential(w, r, ex, problemConflictingCredentials)
		return false
	}
	switch {
	case token == "":
	case ex.credential.Token != "" && ex.credential.Token != token,
		ex.queryCandidate != "" && ex.queryCandidate != token:
		s.refuseCredential(w, r, ex, problemConflictingCredentials)
		return false
	case ex.credential.Token == "" && ex.queryCandidate == "" && s.verifier != nil:
		if id, ok := s.verifier.Verify(token); ok {
			ex.identity = id
			ex.formToken = token
		}
	}
	return true
}

// findPortalFormToken, on a route that forwards no session and counts no
// identity, only finds the form pair dropPortalCredential must remove:
// the request's verified credential, or else a form token that verifies
// (which becomes the request's identity, as on any route). No conflict is
// refused there: the third party's own keys pass untouched.
func (s *Server) findPortalFormToken(raw string, ex *exchange) {
	if !mayHoldQueryToken(raw) {
		return
	}
	for _, v := range queryTokenValues(raw) {
		switch {
		case v == "":
		case v == ex.credential.Token || v == ex.queryToken:
			ex.formToken = v
			return
		case ex.identity.Anonymous():
			if id, ok := s.verifier.Verify(v); ok {
				ex.identity, ex.formToken = id, v
				return
			}
		}
	}
}

// formEncoded reports whether an upstream parses the request's body as
// application/x-www-form-urlencoded: any Content-Type line whose media
// type is it as mime.ParseMediaType reads it (the webhook ingress's
// parser: any case, parameters), or as PHP and Rack read it (the text up
// to the first ';', ',' or whitespace, any case: "application/x-www-form-
// urlencoded, text/plain"); or a POST with no Content-Type, which Rack 2
// parses as a form. Lines that are empty or only whitespace count as no
// Content-Type: Rack 2 reads an empty CONTENT_TYPE as absent (fresh attack
// pass 3 C14). h is the header the upstream receives (ForwardedHeader).
func formEncoded(method string, h http.Header) bool {
	lines := h["Content-Type"]
	if blankLines(lines) {
		return method == http.MethodPost
	}
	const form = "application/x-www-form-urlencoded"
	for _, v := range lines {
		if mt, _, err := mime.ParseMediaType(v); err == nil && mt == form {
			return true
		}
		v = strings.TrimLeft(v, " \t")
		if i := strings.IndexAny(v, ";, \t"); i >= 0 {
			v = v[:i]
		}
		if strings.EqualFold(v, form) {
			return true
		}
	}
	return false
}

// blankLines reports whether no line of vs holds anything but whitespace
// (true for none).
func blankLines(vs []string) bool {
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			return false
		}
	}
	return true
}

// identityCoding reports whether the Content-Encoding lines vs name no
// coding but identity (empty members ignored, any case).
func identityCoding(vs []string) bool {
	for _, v := range vs {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// replayedBody hands the upstream a body the gateway already read whole;
// Close closes the client's body (requestBody: its deadline bookkeeping).
type replayedBody struct {
	*bytes.Reader
	body *requestBody
}

func (b *replayedBody) Close() error { return b.body.Close() }

// refuseBody answers a form body that failed while the gateway read it,
// as the proxy's error handler answers one the transport was reading: a
// stalled or trickled body 408, broken framing 400 (both counted in
// borda_client_errors_total), a client that went away nothing (499).
func (s *Server) refuseBody(w http.ResponseWriter, r *http.Request, ex *exchange, err error, timedOut bool) {
	kind, waiting := ex.body.failure()
	switch {
	case kind != "":
	case timedOut && waiting:
		kind = clientBodyTimeout // the route timeout passed while waiting for the client
	case errors.Is(err, errBodyCut):
		kind = bodyGone
	}
	switch kind {
	case clientBodyTimeout, clientMalformedBody:
		s.metrics.client.WithLabelValues(ex.route.Name, kind).Inc()
		s.log.InfoContext(r.Context(), "request body refused", "route", ex.route.Name, "kind", kind,
			"request_id", ex.id, "error", err.Error())
		if kind == clientBodyTimeout {
			writeProblem(w, problemRequestTimeout, ex.id)
		} else {
			writeProblem(w, problemMalformedBody, ex.id)
		}
	default:
		ex.clientGone = true
	}
}
