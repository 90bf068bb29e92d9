package gateway

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"time"

	"github.com/olp-edu/borda/cookies"
	"github.com/olp-edu/borda/identity"
	"github.com/olp-edu/borda/ratelimit"
)

// exchange is the per-request state the chain fills as the request moves
// in and the response moves out. One allocation per request; it also
// holds the response writer wrapper.
type exchange struct {
	w     responseWriter
	body  requestBody // used when the request has a body (w.body points here)
	start time.Time
	id    string // X-Request-Id
	// idVals is the X-Request-Id header value ([]string{id}, cap 1, so an
	// append copies): the response's, the upstream's and the webhook's
	// share it without a slice of their own.
	idVals [1]string
	// conn is the client connection's memo (Server.HTTPServer), nil
	// outside such a server.
	conn      *peerMemo
	client    netip.Addr // client IP (docs/edge.md, "Client IP")
	clientStr string     // client.String(), or "unknown": set once by observe
	trusted   bool       // the direct peer is a trusted proxy
	subjectIP string     // client IP as rate-limit subject (IPv6 by prefix)
	route     *route     // nil: webhook or no route
	rest      string     // escaped path after the route prefix
	label     string     // metrics/log route label
	identity  identity.Identity
	// credential is the request's one credential (cookies.Resolve, in
	// identify): the limiter's identity is its Token, and rewrite hands
	// the upstream exactly it.
	credential cookies.Resolved
	// queryToken is the verified token of a query-token request
	// (identifyQueryToken); "" otherwise.
	queryToken string
	// queryCandidate is the request's query-token candidate, verified or
	// not (identifyQueryToken): a form-body token must equal it.
	queryCandidate string
	// formBody is the urlencoded body identifyFormToken read (and handed
	// on), nil when it read none; formToken the verified token of a
	// form-body request, "" otherwise.
	formBody  []byte
	formToken string
	verdict   ratelimit.Verdict
	// timer enforces the route timeout until the upstream's response
	// headers arrive (routetimer.go); nil once stopped.
	timer      *routeTimer
	clientGone bool // the client went away before the upstream answered
	// served: the upstream's response headers arrived in time
	// (modifyResponse), so the answer is the upstream's, not one the
	// gateway made (telemetry.Event.Served).
	served bool
	// ctx is the request's context from observe on: the exchange under
	// exchangeKey over a context cancelled (cancel) when the request
	// leaves the chain, by the route timeout (cause errUpstreamTimeout)
	// or when the client goes away. It lives inside the exchange, so
	// neither context.WithValue nor a second request copy for the
	// route's cancellation is paid per request.
	ctx    exchangeContext
	cancel context.CancelCauseFunc
}

type exchangeKey struct{}

// exchangeContext is a context.WithValue(Context, exchangeKey{}, ex)
// without the allocation. Like the standard library's value context it
// embeds its parent, so Done, Err and the cancelCtx lookup of the
// context package go straight to the parent (children of it register
// with the parent's cancelCtx, no goroutine).
type exchangeContext struct {
	context.Context
	ex *exchange
}

// Value returns the exchange for exchangeKey, else the parent's value.
func (c *exchangeContext) Value(key any) any {
	if _, ok := key.(exchangeKey); ok {
		return c.ex
	}
	return c.Context.Value(key)
}

// stopTimer stops the route timer, if one runs, and reports whether the
// timeout passed first.
func (ex *exchange) stopTimer() (timedOut bool) {
	if ex.timer == nil {
		return false
	}
	t := ex.timer
	ex.timer = nil
	return t.disarm()
}

func exchangeFrom(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	if ex == nil {
		return &exchange{} // never nil for handlers used outside the chain (tests)
	}
	return ex
}

// maxRequestIDBytes bounds a client-sent X-Request-Id kept as is.
const maxRequestIDBytes = 128

// requestIDByte marks the bytes a client-sent X-Request-Id may hold:
// A-Z, a-z, 0-9, '.', '_', ':' and '-' (UUIDs, ULIDs, hex, the ids of
// Heroku, Envoy, AWS "1-5f84c7a3-..." and Rails all fit). Anything else
// (markup such as '<' or '"', '%', '/', spaces, control and format
// characters, non-ASCII) never reaches a log line, an upstream or a
// response as the client wrote it: the request gets a fresh id.
var requestIDByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "._:-" {
		t[c] = true
	}
	return t
}()

// saneRequestID reports whether v is kept as the request's id: 1 to
// maxRequestIDBytes bytes, each a requestIDByte.
func saneRequestID(v string) bool {
	if v == "" || len(v) > maxRequestIDBytes {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !requestIDByte[v[i]] {
			return false
		}
	}
	return true
}

// requestID returns the client's X-Request-Id when it is sane
// (saneRequestID: [A-Za-z0-9._:-]{1,128}), else a new random 128-bit hex
// id. The id is unpredictable (math/rand/v2's top-level generator is
// ChaCha8, seeded from the OS at start) but not a secret, so it does not
// pay crypto/rand's system call per request.
func requestID(v string) string {
	if saneRequestID(v) {
		return v
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	var id [32]byte
	hex.Encode(id[:], b[:])
	return string(id[:]) // one allocation (hex.EncodeToString makes two)
}

// traceID returns the trace-id of a W3C traceparent
// ("00-<32 hex>-<16 hex>-<2 hex>"), or "" when the header is absent or
// malformed. The header itself is passed upstream untouched.
func traceID(tp string) string {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	id := tp[3:35]
	for i := 0; i < len(id); i++ {
		if _, ok := unhex(id[i]); !ok {
			return ""
		}
	}
	if id == "00000000000000000000000000000000" {
		return ""
	}
	return id
}

// ClientSubject returns the client IP the gateway resolved for r (trusted
// proxies applied, docs/edge.md) as rate limits name it: IPv4 as is, IPv6
// as its ipv6_prefix_len prefix, "unknown" when unresolvable; "" for a
// request that did not pass through the gateway. The webhook ingress
// throttles failed authentication by it (docs/webhooks.md §2).
func ClientSubject(r *http.Request) string {
	ex, _ := r.Context().Value(exchangeKey{}).(*exchange)
	if ex == nil {
		return ""
	}
	return ex.subjectIP
}
