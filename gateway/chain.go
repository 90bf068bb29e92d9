package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"time"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/ratelimit"
	"github.com/olp-edu/borda/telemetry"
)

// The request flow of docs/edge.md ("Request flow"), built once in New:
//
//	observe   request ID, client IP, writer wrapper; after the response:
//	          access log, metrics, telemetry.Record
//	recover   a panic becomes a logged 500 (http.ErrAbortHandler passes)
//	dispatch  webhook paths on any Host; else route match, 404 when none
//	  per route:
//	  CORS      rs/cors; preflights answered 204 here
//	  identify  verified JWT → the exchange's cookies.Identity (header,
//	            cookie, query, and a form body where a user rule applies)
//	  limit     ratelimit Verdict; 429 here without touching the body
//	  proxy     ReverseProxy Rewrite (URL, X-Forwarded-*, cookie filter),
//	            ModifyResponse (Set-Cookie policy), ErrorHandler
//
// recover sits inside observe, so a panic's 500 is logged and counted like
// any other response; route match sits before CORS because the CORS
// policy is the route's.

// observe is the outermost layer.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		ex := &exchange{start: time.Now()}
		ex.w.reset(w, s.sendTimeout)
		var peer netip.Addr
		peerStr := ""
		if m, ok := r.Context().Value(peerMemoKey{}).(*peerMemo); ok {
			ex.conn = m
			peer, peerStr = m.peer(r.RemoteAddr) // once per connection (Server.HTTPServer)
		} else {
			peer = parseHostPort(r.RemoteAddr)
		}
		ex.client, ex.trusted = s.ip.resolveFrom(peer, r.Header)
		ex.clientStr = "unknown"
		switch {
		case !ex.trusted && peerStr != "":
			ex.clientStr = peerStr // the client is the peer
		case ex.client.IsValid():
			ex.clientStr = ex.client.String() // once: logs, headers and IPv4 subjects reuse it
		}
		ex.subjectIP = ex.clientStr
		// A client's X-Request-Id is adopted only from a trusted proxy
		// (which made or vetted it); from any other peer a fresh id, as
		// Envoy regenerates x-request-id for edge requests
		// (preserve_external_request_id: false): a client copying another
		// request's id would merge log trails (fresh attack pass 2 A50).
		var clientID string
		if v := r.Header["X-Request-Id"]; len(v) > 0 && ex.trusted {
			clientID = v[0]
		}
		ex.id = requestID(clientID)
		ex.idVals[0] = ex.id
		// The response carries it from here on; the upstream's copy is
		// set by rewrite and the webhook's by dispatch, so the incoming
		// header map does not grow for it.
		h := w.Header()
		h["X-Request-Id"] = ex.idVals[:]
		if s.draining.Load() {
			h["Connection"] = []string{"close"}
		}
		if ex.client.Is6() {
			ex.subjectIP = s.ip.subject(ex.client)
		}
		if r.Body != nil && r.Body != http.NoBody {
			ex.body.reset(r.Body, w)
			r.Body = &ex.body
			ex.w.body = &ex.body
		}
		base, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil) // last: the exchange's context ends with the request
		ex.ctx, ex.cancel = exchangeContext{Context: base, ex: ex}, cancel
		r = r.WithContext(&ex.ctx)
		defer s.finish(ex, r)
		if ex.w.body != nil {
			// Runs before net/http's own drain of an unread body.
			defer ex.body.stop()
		}
		if s.rejectTarget(&ex.w, r, ex) {
			return
		}
		closeAfterChunked(&ex.w, r)
		next.ServeHTTP(&ex.w, r)
	})
}

// finish records one finished request: metrics, telemetry and the access
// log. It runs deferred, so aborted requests (http.ErrAbortHandler) are
// recorded too.
func (s *Server) finish(ex *exchange, r *http.Request) {
	status := ex.w.statusOr(http.StatusOK)
	if ex.clientGone {
		status = statusClientClosed
	}
	dur := time.Since(ex.start)
	label := ex.label
	if label == "" {
		label = labelUnrouted
	}
	lm := s.unroutedMetrics
	switch {
	case ex.route != nil:
		lm = ex.route.metrics
	case ex.label == labelWebhook:
		lm = s.webhookMetrics
	}
	lm.record(status, methodLabel(r.Method), dur)
	path := r.URL.Path
	if s.webhook != nil {
		// Never a URL token in a log line or a key: on every route, as a
		// path routed elsewhere ("/Webhooks/WhatsApp/t/TOKEN": the router
		// is case-sensitive) may still carry one.
		path = s.webhook.RedactPath(path)
	}
	if s.recorder != nil {
		route := ""
		if ex.route != nil {
			route = ex.route.Name
		} else if ex.label == labelWebhook {
			route = labelWebhook
		}
		s.recorder.Record(telemetry.Event{
			Time:       ex.start.Add(dur),
			Route:      route,
			Path:       path,
			Status:     status,
			Escola:     ex.identity.EscolaID,
			Blocked:    ex.verdict.Blocked(),
			WouldBlock: ex.verdict.WouldBlock(),
			// The upstream's answer, or an event the ingress accepted;
			// never an answer the gateway made on its own (a preflight,
			// Max-Forwards: 0, a loop refusal, a 502/504): its path is the
			// client's choice (fresh attack pass A016).
			Served: ex.served || (ex.label == labelWebhook && status < 400),
		})
	}
	lvl := slog.LevelInfo
	if status >= 500 {
		lvl = slog.LevelWarn
	}
	if !s.log.Enabled(r.Context(), lvl) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("route", label),
		slog.String("method", r.Method),
		slog.String("host", r.Host),
		slog.String("path", path), // never the query: it may carry tokens
		slog.Int("status", status),
		slog.Float64("duration_s", dur.Seconds()),
		slog.Int64("bytes", ex.w.bytes),
		slog.String("client_ip", ex.clientStr),
		slog.String("request_id", ex.id),
	)
	if tid := traceID(r.Header.Get("Traceparent")); tid != "" {
		attrs = append(attrs, slog.String("trace_id", tid))
	}
	if ex.w.hijacked {
		attrs = append(attrs, slog.Bool("upgraded", true))
	}
	if ex.verdict.Blocked() {
		attrs = append(attrs, slog.Bool("rate_limited", true))
	} else if ex.verdict.WouldBlock() {
		attrs = append(attrs, slog.Bool("would_block", true))
	}
	if !ex.identity.Anonymous() {
		attrs = append(attrs, slog.Bool("verified", true))
	}
	s.log.LogAttrs(r.Context(), lvl, "http request", attrs...)
}

// statusClientClosed is nginx's 499: the client closed the connection
// before the response (logged and counted, never sent).
const statusClientClosed = 499

// recoverer turns a panic into a 500 problem when nothing was sent yet.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // sentinel panic value
				panic(v)
			}
			ex := exchangeFrom(r.Context())
			s.log.ErrorContext(r.Context(), "panic serving request", "panic", v,
				"request_id", ex.id, "stack", string(debug.Stack()))
			if ex.w.wroteHeader {
				panic(http.ErrAbortHandler)
			}
			writeProblem(w, problemInternal, ex.id)
		}()
		next.ServeHTTP(w, r)
	})
}

// dispatch applies the path policy (docs/edge.md, "Paths"), sends
// webhook paths to the ingress on any Host, then matches the route table;
// no route answers 404. A path refused by the policy answers 400 before
// any upstream, identity or rate limit sees it, and so does a request
// with more than one Authorization line on a route (identity would
// verify one and the upstream could read the other).
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	ex := exchangeFrom(r.Context())
	if list := s.deniedGlobally(ex, r); list != "" {
		s.refuseDenied(w, ex, list)
		return
	}
	path, slashes, fault := s.cleanPath(r.URL)
	if fault != pathOK {
		s.refusePath(w, ex, fault)
		return
	}
	if s.webhook != nil {
		for _, p := range s.webhookPaths {
			if _, ok := matchPrefix(path, p); ok {
				ex.label = labelWebhook
				if slashes && s.escapedSlashes == slashReject {
					s.refusePath(w, ex, pathEscapedSlash)
					return
				}
				r.Header["X-Request-Id"] = ex.idVals[:] // the envelope's x-request-id (docs/webhooks.md)
				s.webhook.ServeHTTP(w, r)
				return
			}
		}
	}
	rt, rest := s.router.match(r.Host, path)
	if rt == nil {
		ex.label = labelUnrouted
		mergeVary(w.Header(), "Origin")
		writeProblem(w, problemNotFound, ex.id)
		return
	}
	ex.route, ex.rest, ex.label = rt, rest, rt.Name
	ex.w.varyOrigin = rt.varyOrigin
	if list := s.deniedOnRoute(rt.Name, ex, r); list != "" {
		s.refuseDenied(w, ex, list)
		return
	}
	if slashes && rt.escapedSlashes == slashReject {
		s.refusePath(w, ex, pathEscapedSlash)
		return
	}
	if len(r.Header["Authorization"]) > 1 {
		mergeVary(w.Header(), "Origin")
		writeProblem(w, problemDuplicateAuthorization, ex.id)
		return
	}
	rt.handler.ServeHTTP(w, r)
}

// cleanPath applies the path policy to the request URL in place (the URL
// is shared with observe's request, so the access log and telemetry see,
// and redact, the path that is served) and returns the escaped path to
// route on, whether it still holds escaped slashes (reject or keep: the
// route's policy decides), and the fault that refuses it whatever the
// route.
//
// The order is the mechanism: control characters and double encodings
// are refused on the path as sent; under unescape, escaped slashes and
// backslashes become "/" first; then "." and ".." segments are resolved
// and empty ones merged (removeDotSegments); then a dot segment that
// survived, hidden behind ";params" or (under keep) an escaped slash, is
// refused. So the path routed is the path the upstream resolves, and no
// spelling of ".." can walk out of a route's prefix or its upstream's
// base path.
func (s *Server) cleanPath(u *url.URL) (string, bool, pathFault) {
	path := wirePath(u)
	slashes, fault := scanPath(path)
	if fault != pathOK {
		return path, slashes, fault
	}
	path = escapeRawBytes(path) // a raw '\' becomes %5C, so it counts as one below
	if slashes && s.escapedSlashes == slashUnescape {
		path, slashes = unescapeSlashes(path), false
	}
	path, _ = removeDotSegments(path)
	if hasHiddenDotSegment(path, slashes) {
		return path, slashes, pathHiddenDot
	}
	if path != u.EscapedPath() {
		decoded, err := url.PathUnescape(path)
		if err != nil {
			return path, slashes, pathControl // unreachable: the path was parsed once
		}
		u.Path, u.RawPath = decoded, path
	}
	return path, slashes, pathOK
}

// refusePath answers 400 for a path the policy refuses.
func (s *Server) refusePath(w http.ResponseWriter, ex *exchange, f pathFault) {
	if ex.label == "" {
		ex.label = labelUnrouted
	}
	mergeVary(w.Header(), "Origin")
	writeProblem(w, pathProblem(f), ex.id)
}

// problemTokenTooLarge answers a Bearer token over cookies.MaxTokenBytes:
// forwarding it would hand the upstream a credential the rate limiter
// could not read (docs/edge.md, Identity).
var problemTokenTooLarge = problem{Title: "Credencial grande demais", Status: http.StatusRequestHeaderFieldsTooLarge,
	Detail: "O token de acesso enviado no cabeçalho Authorization excede 8 KiB. Entre novamente para obter um token válido."}

// problemTokenMalformed answers a Bearer credential that is not one
// token68 or is a JWS whose segments are not canonical base64url
// (cookies.AuthorizationNonCanonical): the verifier cannot read it (so the
// limiter would count the request as anonymous) while a lenient upstream
// could accept it as the user's (docs/edge.md, Identity).
var problemTokenMalformed = problem{Title: "Credencial malformada", Status: http.StatusUnauthorized,
	Detail: "O token de acesso não é um único token em base64url canônico (sem listas, espaços ou separadores). Entre novamente para obter um token válido."}

// identify resolves the request's one credential (cookies.Resolve) and
// records it and its verified identity in the exchange: the limiter,
// telemetry and the access log read the identity, rewrite forwards exactly
// the credential. It answers 400 when the request carries two different
// credentials and no single one verifies (cookies.ErrConflict), 431 to an
// Authorization: Bearer token longer than cookies.MaxTokenBytes (olp_*
// cookies over it are removed by cookies.ApplyRequest instead) and 401 to
// a Bearer value that is not one canonical token, so the upstream never
// gets a credential the limiter did not see.
func (s *Server) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ex := exchangeFrom(r.Context())
		if _, ok := r.Header["Authorization"]; ok { // neither check refuses a request without one
			if cookies.BearerTooLarge(r.Header) {
				s.refuseCredential(w, r, ex, problemTokenTooLarge)
				return
			}
			if cookies.AuthorizationNonCanonical(r.Header) {
				s.refuseCredential(w, r, ex, problemTokenMalformed)
				return
			}
		}
		if !s.upgradeOriginAllowed(w, r, ex) {
			return
		}
		if _, ok := r.Header["Authorization"]; ok || len(r.Header["Cookie"]) > 0 {
			cred, err := cookies.Resolve(r.Header, ex.route.forward, s.verifies)
			switch {
			case errors.Is(err, cookies.ErrTooManyCredentials):
				s.refuseCredential(w, r, ex, problemTooManyCredentials)
				return
			case err != nil:
				s.refuseCredential(w, r, ex, problemConflictingCredentials)
				return
			}
			ex.credential = cred
			if s.verifier != nil && cred.Token != "" {
				if id, ok := s.verifier.Verify(cred.Token); ok {
					ex.identity = id // the limiter, telemetry and the access log read it here
				}
			}
		}
		if !s.identifyQueryToken(w, r, ex) || !s.identifyFormToken(w, r, ex) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseCredential answers a request refused for its credentials before
// the limit layer: 400 (two different credentials, more than
// cookies.MaxCandidates of them), 401 (a malformed Authorization), 431 (an
// oversized Bearer token), 413 or 415 (a form body the gateway cannot
// read for its token). The refusal is charged to the route's rules as an
// anonymous request (its ip and route rules count it; user and escola
// rules skip), so a client sending refused credentials spends its per-IP
// budget like any other request, and once a rule blocks it the answer is
// that rule's 429 (fresh attack pass 2 A66: 120 olp_auth tokens answered
// 400 for ever, never 429).
func (s *Server) refuseCredential(w http.ResponseWriter, r *http.Request, ex *exchange, p problem) {
	if s.limiter != nil {
		v := s.limiter.Decide(r.Context(), ratelimit.Subject{Route: ex.route.Name, IP: ex.subjectIP})
		ex.verdict = v
		if v.Blocked() {
			ratelimit.WriteTooManyRequests(w, v)
			return
		}
	}
	writeProblem(w, p, ex.id)
}

// limit asks the Limiter for the request's Verdict. A block answers the
// 429 of docs/rate-limiting.md ("Responses") here: the upstream is not called and the body is
// not read (so an Expect: 100-continue client never gets its 100), unless
// identify read a form body for its token (identifyFormToken).
// Rate-limit headers go on allowed responses when the route exposes them,
// and always with a would-block, which is also told to the upstream.
func (s *Server) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ex := exchangeFrom(r.Context())
		v := s.limiter.Decide(r.Context(), ratelimit.Subject{
			Route:  ex.route.Name,
			IP:     ex.subjectIP,
			User:   ex.identity.UserID,
			Escola: ex.identity.EscolaID,
		})
		ex.verdict = v
		if v.Blocked() {
			ratelimit.WriteTooManyRequests(w, v)
			return
		}
		if v.WouldBlock() {
			ratelimit.WriteHeaders(w.Header(), v)
			w.Header().Set(headerWouldBlock, "true")
		} else if ex.route.exposeHeaders && len(v.Decisions) > 0 {
			ratelimit.WriteHeaders(w.Header(), v)
		}
		next.ServeHTTP(w, r)
	})
}

// headerWouldBlock marks a request an observe-mode rule would have
// blocked, on the response and on the request to the upstream.
const headerWouldBlock = "X-RateLimit-Would-Block"

// wouldBlockKey is headerWouldBlock as net/http stores it in a Header map.
var wouldBlockKey = http.CanonicalHeaderKey(headerWouldBlock)
