package ingress

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"time"
)

// ServeHTTP answers one webhook delivery (docs/webhooks.md §3, the status table).
func (i *Ingress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	i.metrics.inflight.Inc()
	defer i.metrics.inflight.Dec()
	status := i.serve(w, r)
	i.metrics.answered(status)
	i.metrics.httpTotal.get(i.metrics.latency, "http_total").Observe(time.Since(start).Seconds())
}

// delivery is one request as it passes the stages of serve.
type delivery struct {
	src    *source
	target requestTarget
	kind   int       // mediaKind of its Content-Type
	isJSON bool      // the body is read as JSON (bodyIsJSON)
	body   []byte    // read whole (receive)
	at     time.Time // when the body was read: received_at, signature timestamps, dedup
	id     string    // the event id (eventid.go)
	// encoded is the envelope's buffer, handed back with body to the
	// scratch pool once the answer is written.
	encoded []byte
}

// serve runs a delivery through the stages of the status table
// (docs/webhooks.md §3), in the contract's order. Each stage either
// passes the delivery on or writes the answer and returns its status:
// admit (source, method, credentials: 404, 405, 503 NOT_CONFIGURED, 401,
// 429 AUTH_THROTTLED), checkHead (coding, media type, length: 415, 400,
// 413), receive (the body under body_timeout and the memory budget: 503
// BODY_BUDGET_EXHAUSTED, 413, 408, 400), checkBody (signature, JSON:
// 401, 400), claim (dedup: 429 REQUEST_IN_FLIGHT, 200 ALREADY_PROCESSED)
// and publish (envelope and broker confirm: 503, 200).
func (i *Ingress) serve(w http.ResponseWriter, r *http.Request) string {
	var d delivery
	if status := i.admit(w, r, &d); status != "" {
		return status
	}
	if status := i.checkHead(w, r, &d); status != "" {
		return status
	}
	sc := getScratch()
	charged, status := i.receive(w, r, &d, sc)
	defer charged.release()
	defer func() { sc.put(d.body, d.encoded) }() // nothing refers to either once serve returns
	if status != "" {
		return status
	}
	if status := i.checkBody(w, r, &d); status != "" {
		return status
	}
	ticket, status := i.claim(w, r, &d)
	if status != "" {
		return status
	}
	return i.publish(w, r, &d, sc, ticket)
}

// admit finds the delivery's source and checks the method and the
// credentials a request carries before its body (tokens, a signature's
// headers).
func (i *Ingress) admit(w http.ResponseWriter, r *http.Request, d *delivery) string {
	src, rest := matchSource(i.sources, r.URL.Path)
	if src == nil {
		return respond(w, http.StatusNotFound, StatusNotFound, "")
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return respond(w, http.StatusMethodNotAllowed, StatusMethodNotAllowed, "")
	}
	if src.broken != nil {
		// This source only: providers retry a 503 (they drop on 401).
		w.Header().Set("Retry-After", "60")
		return respond(w, http.StatusServiceUnavailable, StatusServiceUnavailable, ReasonNotConfigured)
	}
	d.src, d.target = src, parseTarget(rest, r.URL.RawQuery)
	if !safeID(d.target.event) {
		// "/%1b[2J" or "/%0d%0a…" would carry a terminal escape or a line
		// break into the envelope's event (docs/webhooks.md §5): dropped.
		d.target.event = ""
	}
	if reason := i.authenticated(src, r, d.target); reason != "" {
		return i.refuse(w, r, src, reason)
	}
	return ""
}

// checkHead checks what the header says of the body before any of it is
// read: its coding, its media type (one Content-Type, JSON or a form) and
// its announced length.
func (i *Ingress) checkHead(w http.ResponseWriter, r *http.Request, d *delivery) string {
	if !identityCoding(r.Header["Content-Encoding"]) {
		// Attack A04: a gzip body was acknowledged and delivered without
		// its Content-Encoding, undecodable downstream. The ingress
		// decodes no coding, so it refuses them all (RFC 9110 §15.5.16:
		// 415, with Accept-Encoding naming what is accepted).
		w.Header().Set("Accept-Encoding", "identity")
		return respond(w, http.StatusUnsupportedMediaType, StatusUnsupportedMediaType, ReasonContentEncoding)
	}
	if len(r.Header["Content-Type"]) > 1 {
		return respondInvalid(w, ReasonContentTypeRepeated)
	}
	ct := headerValue(r.Header, "Content-Type")
	if d.kind = mediaKind(ct); d.kind == mediaOther {
		return respond(w, http.StatusUnsupportedMediaType, StatusUnsupportedMediaType, "")
	}
	if !charsetUTF8(ct) {
		return respondInvalid(w, ReasonInvalidUTF8)
	}
	if r.ContentLength > i.maxBody {
		w.Header().Set("Connection", "close") // never read the junk
		return respond(w, http.StatusRequestEntityTooLarge, StatusPayloadTooLarge, "")
	}
	return ""
}

// receive reads the body whole into sc's buffer, within body_timeout and
// max_body_bytes, charged to the memory budget of its source's kind
// (bodybudget.go). The caller releases the returned charge once the
// request ends, whatever the answer.
func (i *Ingress) receive(w http.ResponseWriter, r *http.Request, d *delivery, sc *scratch) (*budgetReader, string) {
	// Allocate the body at once only for a request a token has
	// authenticated; a signed source's request is unauthenticated until
	// verified, and must not reserve 10 MB with a Content-Length alone.
	hint := r.ContentLength
	budget := i.authBudget
	if len(d.src.tokens) == 0 {
		hint, budget = -1, i.budget
	}
	// A body that trickles in (1 byte a second) must not hold the
	// request open for ever: the server has no ReadTimeout (it would cut
	// the proxy's uploads and streams), so the ingress sets its own.
	rc := http.NewResponseController(w)
	if i.bodyTime > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(i.bodyTime)) // ErrNotSupported: no deadline, as before
	}
	// Every body in memory is charged to a budget: an unauthenticated
	// one (signature-only source) to budget, a token source's to
	// authBudget, its Content-Length reserved at once since its buffer is
	// allocated that size.
	charged := budget.reader(http.MaxBytesReader(w, r.Body, i.maxBody), i.clientIP(r))
	// Under pressure the budget may take this body's bytes back for a
	// newer one (reclaimFor): its read, blocked on the network, is woken.
	charged.abort = func() { _ = rc.SetReadDeadline(time.Now()) }
	if err := charged.reserve(hint); err != nil {
		return charged, respondBudgetSpent(w, err)
	}
	body, err := readBodyInto(charged, hint, sc.body)
	charged.settle()
	d.body = body
	_ = rc.SetReadDeadline(time.Time{})
	if charged.reclaimed.Load() {
		err = errBodyReclaimed // read whole meanwhile, but no longer charged
	}
	if err == nil {
		return charged, ""
	}
	if errors.Is(err, errBodyReclaimed) {
		w.Header().Set("Connection", "close")
		return charged, respond(w, http.StatusRequestTimeout, StatusRequestTimeout, ReasonBodyReclaimed)
	}
	if errors.Is(err, errBodyBudget) || errors.Is(err, errBodyShare) {
		return charged, respondBudgetSpent(w, err)
	}
	if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
		w.Header().Set("Connection", "close")
		return charged, respond(w, http.StatusRequestEntityTooLarge, StatusPayloadTooLarge, "")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.Header().Set("Connection", "close")
		return charged, respond(w, http.StatusRequestTimeout, StatusRequestTimeout, "")
	}
	return charged, respond(w, http.StatusBadRequest, StatusInvalidPayload, "")
}

// respondBudgetSpent answers a body the budget refused (err) and closes
// the connection: 429 BODY_SHARE_EXHAUSTED when the client already holds
// its share (its own doing), else 503 BODY_BUDGET_EXHAUSTED; Retry-After
// 1 either way, so a provider retries.
func respondBudgetSpent(w http.ResponseWriter, err error) string {
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	if errors.Is(err, errBodyShare) {
		return respond(w, http.StatusTooManyRequests, StatusTooManyRequests, ReasonBodyShare)
	}
	return respond(w, http.StatusServiceUnavailable, StatusServiceUnavailable, ReasonBodyBudget)
}

// checkBody verifies a signed source's signature over the body, then
// that the body is one parsers read alike: not empty, valid JSON when its
// media type says JSON, (read as JSON) UTF-8 without a repeated member,
// and (read as a form) without a field two parsers read differently.
func (i *Ingress) checkBody(w http.ResponseWriter, r *http.Request, d *delivery) string {
	d.at = i.now()
	if d.src.sig != nil {
		if err := d.src.sig.verify(r.Header, d.body, d.at); err != nil {
			return i.refuse(w, r, d.src, authSignatureInvalid, "error", err)
		}
	}
	if len(d.body) == 0 || (d.kind == mediaJSON && !jsonValid(d.body)) {
		return respond(w, http.StatusBadRequest, StatusInvalidPayload, "")
	}
	// Every body read as JSON (a JSON media type, or a JSON object sent
	// as another type: bodyIsJSON) is read one way by every parser.
	if d.isJSON = bodyIsJSON(d.kind, d.body); d.isJSON {
		if reason := jsonRefused(d.body); reason != "" {
			return respondInvalid(w, reason)
		}
	} else if d.kind == mediaForm {
		if reason := formRefused(d.body); reason != "" {
			return respondInvalid(w, reason)
		}
	}
	return ""
}

// claim takes the delivery's event id in the dedup table, or answers
// that the event is being published (429) or already stored (200).
func (i *Ingress) claim(w http.ResponseWriter, r *http.Request, d *delivery) (dedupTicket, string) {
	d.id = d.src.idOf(r.Header, d.body, d.isJSON)
	state, ticket := i.dedup.begin(d.src.name, d.id, d.at)
	switch state {
	case stateInFlight:
		i.metrics.dedupHits.WithLabelValues(state.String()).Inc()
		w.Header().Set("Retry-After", "2")
		return ticket, respond(w, http.StatusTooManyRequests, StatusRequestInFlight, "")
	case stateConfirmed:
		i.metrics.dedupHits.WithLabelValues(state.String()).Inc()
		return ticket, respond(w, http.StatusOK, StatusAlreadyProcessed, "")
	}
	return ticket, ""
}

// publish builds the envelope and publishes it; 200 only once the broker
// confirmed it with no return. On any failure the claim is given up
// before answering 503, so the provider's retry is accepted: the reason
// is the broker's (Reason), or INTERNAL_ERROR when the envelope could not
// be built here.
func (i *Ingress) publish(w http.ResponseWriter, r *http.Request, d *delivery, sc *scratch, ticket dedupTicket) string {
	// Whatever happens from here (a panic included, which the gateway's
	// recoverer turns into a 500), the claim on the id ends: confirmed,
	// or forgotten so the provider's retry is accepted. A claim left
	// IN_FLIGHT would answer 429 to every retry for dedup_ttl (30 min),
	// longer than Evolution retries: the event would be lost.
	settled := false
	defer func() {
		if !settled {
			i.dedup.forget(ticket)
		}
	}()
	msg, err := i.message(d.src, r, d.target, d.id, d.body, d.isJSON, d.at, sc)
	if err != nil {
		i.dedup.forget(ticket) // before answering: the retry must find the id free
		settled = true
		i.metrics.failures.WithLabelValues(ReasonInternalError).Inc()
		i.logger.Error("webhook not published: its envelope could not be built; answering 503", "source", d.src.name, "event_id", d.id, "error", err)
		w.Header().Set("Retry-After", "5")
		return respond(w, http.StatusServiceUnavailable, StatusServiceUnavailable, ReasonInternalError)
	}
	d.encoded = msg.Body
	// The provider hanging up must not cut the wait short: the answer
	// decides whether the id is remembered as CONFIRMED.
	ctx := context.Background() // the publisher reads no value from it
	t0 := time.Now()
	err = i.pub.Publish(ctx, msg)
	i.metrics.amqpConfirm.get(i.metrics.latency, "amqp_confirm").Observe(time.Since(t0).Seconds())
	if err != nil {
		i.dedup.forget(ticket) // before answering: the retry must find the id free
		settled = true
		reason := Reason(err)
		i.metrics.failures.WithLabelValues(reason).Inc()
		if reason == ReasonUnroutable {
			i.metrics.unroutable.Inc()
		}
		// Broker state changes are logged once by the publisher and every
		// reason is counted; per-request lines are warnings only for the
		// reasons that point at the topology or the broker's judgement.
		level := slog.LevelDebug
		if reason == ReasonUnroutable || reason == ReasonNack || reason == ReasonForwardQueueMissing || reason == ReasonForwardUnbound {
			level = slog.LevelWarn
		}
		i.logger.Log(r.Context(), level, "webhook not published; answering 503", "source", d.src.name, "event_id", d.id, "reason", reason, "error", err)
		w.Header().Set("Retry-After", "5")
		return respond(w, http.StatusServiceUnavailable, StatusServiceUnavailable, reason)
	}
	i.dedup.confirm(ticket, i.now()) // the TTL restarts at the confirm
	settled = true
	return respond(w, http.StatusOK, StatusPublishedConfirmed, "")
}

// authenticated checks the request's credential against the source's
// tokens (when it has any) and that a signed source's headers are there.
// It returns "" when they pass, else the failure reason (auth* constants).
func (i *Ingress) authenticated(src *source, r *http.Request, target requestTarget) string {
	if len(src.tokens) > 0 {
		p := credential(r.Header, target)
		switch {
		case p.repeated:
			return authRepeated
		case p.conflict:
			return authConflict
		case p.method == "":
			return authMissing
		case !src.tokens.match(p.value):
			return authMismatch
		}
	}
	if src.sig != nil {
		if repeatedField(r.Header, src.sig.fields()) {
			return authSignatureRepeated
		}
		if !src.sig.present(r.Header) {
			return authSignatureMissing
		}
	}
	return ""
}

// refuse answers a failed authentication: 401, or 429 AUTH_THROTTLED with
// Retry-After once the client IP or the source is over its failure limit
// (throttle.go). Failures are counted by reason; each one is logged while
// the client is under the limit, and a throttling episode once, so a
// flood of wrong tokens cannot flood the log. args are extra log
// attributes (never a credential).
func (i *Ingress) refuse(w http.ResponseWriter, r *http.Request, src *source, reason string, args ...any) string {
	i.metrics.authFailures.WithLabelValues(reason).Inc()
	client := i.clientIP(r)
	v := i.throttle.fail(src.name, client, i.now())
	if v.wait <= 0 {
		i.logger.Info("webhook authentication refused", append([]any{"source", src.name, "reason", reason, "client_ip", client}, args...)...)
		return respond(w, http.StatusUnauthorized, StatusUnauthorized, "")
	}
	i.metrics.authThrottled.WithLabelValues(v.scope).Inc()
	if v.first {
		i.logger.Warn("webhook authentication failures throttled; answering 429 until they slow down",
			"source", src.name, "scope", v.scope, "client_ip", client, "retry_after_s", retryAfterSeconds(v.wait))
	}
	return respondThrottled(w, retryAfterSeconds(v.wait))
}
