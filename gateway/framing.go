package gateway

import (
	"net/http"
	"strings"
)

// rejectTarget answers a request that no route may receive, before
// routing (docs/edge.md, "Client connections and request bodies"):
//
//   - the HTTP/2 connection preface ("PRI * HTTP/2.0") on this HTTP/1.1
//     listener: 505, as nginx and Envoy refuse it; net/http hands it to the
//     handler only so an h2c server can take over, which Borda does not
//     run;
//   - a request target that is not a path: asterisk-form for any method
//     but OPTIONS (net/http answers "OPTIONS *" itself) and CONNECT's
//     authority-form ("CONNECT host:443", and CONNECT of any target):
//     400, since a reverse proxy tunnels nothing. Absolute-form targets
//     ("GET http://host/x") are left to routing;
//   - a request target holding '#': a fragment is never part of a request
//     (RFC 9112 §3.2: no form of request-target has one; browsers never
//     send it) and net/http reads it into the query, which then reached
//     the upstream (fresh attack pass 19 A52): 400, as Envoy refuses it.
//
// Both are client errors (borda_client_errors_total{kind="bad_request"}),
// answered with Connection: close. It reports whether it answered.
func (s *Server) rejectTarget(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	var p problem
	switch {
	case r.ProtoMajor == 2 && r.Method == "PRI":
		p = problemVersionNotSupported
	case r.Method == http.MethodConnect:
		p = problemBadTarget
	case strings.IndexByte(r.RequestURI, '#') >= 0:
		p = problemBadTarget
	case r.URL.Scheme != "": // absolute-form ("GET http://host HTTP/1.1"), routed as before
		return false
	case !strings.HasPrefix(r.URL.Path, "/") && !(r.Method == http.MethodOptions && r.RequestURI == "*"):
		p = problemBadTarget
	default:
		return false
	}
	ex.label = labelUnrouted
	s.metrics.client.WithLabelValues(labelUnrouted, clientBadTarget).Inc()
	w.Header()["Connection"] = []string{"close"}
	writeProblem(w, p, ex.id)
	return true
}

// closeAfterChunked asks net/http to close the connection after the
// answer to a request whose body came chunked (docs/edge.md, "Client
// connections and request bodies"). A request with both Content-Length
// and Transfer-Encoding is the request-smuggling shape RFC 9112 §6.1
// asks an intermediary to close after answering; net/http deletes the
// Content-Length before any handler runs, so the two cannot be told
// apart here and every chunked request closes its connection (browsers
// and the webhook providers send Content-Length; nginx since 1.23
// refuses the pair with 400, older nginx closed as Borda does). Bytes
// the client sent after the chunked body are then never read as a second
// request.
func closeAfterChunked(w http.ResponseWriter, r *http.Request) {
	if len(r.TransferEncoding) > 0 {
		w.Header()["Connection"] = []string{"close"}
	}
}
