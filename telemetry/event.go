package telemetry

import "time"

// Event is one finished request as the gateway reports it to Record. The
// gateway fills every field from what it already knows; Record copies the
// value into a queue and returns.
type Event struct {
	// Time is when the request finished; its UTC minute picks the counter.
	// The zero Time means "now" (taken when the event is folded).
	Time time.Time
	// Route is the matched route's name ("portal"); empty when no route
	// matched (counted as the endpoint "unrouted:other").
	Route string
	// Path is the request's URL path ("/api/alunos/42"); it is turned into
	// a template ("/api/alunos/{id}") off the request path.
	Path string
	// Status is the HTTP status code sent to the client (100-999; other
	// values are not counted under status).
	Status int
	// Escola is the escola_id of the request's verified identity; empty
	// when the request has none.
	Escola string
	// Blocked reports an enforced rate-limit block (HTTP 429).
	Blocked bool
	// WouldBlock reports that a rule in observe mode would have blocked it.
	WouldBlock bool
	// Served reports that a server answered this path: the route's
	// upstream sent the response, or the webhook ingress accepted the
	// event. An answer the gateway made on its own (a CORS preflight, an
	// OPTIONS with Max-Forwards: 0, a loop refusal, a 502/504 for a
	// failed exchange, any refusal) is not served: its path is the
	// client's choice, so it counts like a refused request and never
	// takes an endpoint's place (docs/telemetry.md, "Endpoints").
	Served bool
}
