package gateway

import (
	"net/http"
	"strconv"
)

// Max-Forwards (RFC 9110 §7.6.2) limits how many intermediaries an
// OPTIONS request may pass; other methods ignore it (forwarded as sent,
// as the RFC lets a recipient do). TRACE is never forwarded: every TRACE
// is answered 405 here (see answerMaxForwards).
var (
	problemBadMaxForwards = problem{Title: "Requisição inválida", Status: http.StatusBadRequest,
		Detail: "O cabeçalho Max-Forwards deve ser um único número inteiro não negativo."}
	problemTraceRefused = problem{Title: "Método não permitido", Status: http.StatusMethodNotAllowed,
		Detail: "Este gateway não ecoa requisições TRACE."}
)

// maxForwardsAllow is the Allow of the gateway's own answer to
// "OPTIONS … Max-Forwards: 0": the methods routes proxy (TRACE is never
// echoed, see answerMaxForwards).
const maxForwardsAllow = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

// answerMaxForwards answers what the gateway answers itself before
// proxying (docs/edge.md, "Max-Forwards and Via"). TRACE, with or without
// Max-Forwards: 405 with Allow, never forwarded (an upstream that echoes
// TRACE, Apache httpd's default, would hand back the Authorization the
// gateway minted from the HttpOnly olp_auth cookie: cross-site tracing;
// nginx refuses TRACE the same way). OPTIONS with Max-Forwards: 0: the
// gateway is the final recipient and answers 200 with Allow and no body;
// N > 0 is forwarded with N-1 (decrementMaxForwards). A Max-Forwards that
// is not one decimal number (or several lines): 400. It reports whether it
// answered.
func answerMaxForwards(w http.ResponseWriter, r *http.Request, id string) bool {
	if r.Method == http.MethodTrace {
		w.Header()["Allow"] = []string{maxForwardsAllow}
		writeProblem(w, problemTraceRefused, id)
		return true
	}
	if r.Method != http.MethodOptions {
		return false
	}
	vals, ok := r.Header["Max-Forwards"]
	if !ok {
		return false
	}
	n, valid := parseMaxForwards(vals)
	switch {
	case !valid:
		w.Header()["Connection"] = []string{"close"}
		writeProblem(w, problemBadMaxForwards, id)
	case n > 0:
		return false
	default:
		h := w.Header()
		h["Allow"] = []string{maxForwardsAllow}
		h["Content-Length"] = []string{"0"}
		w.WriteHeader(http.StatusOK)
	}
	return true
}

// parseMaxForwards reads the one Max-Forwards line: 1*DIGIT, capped at
// 2^31 (a longer run of digits is still valid; it is forwarded as
// 2147483647).
func parseMaxForwards(vals []string) (int64, bool) {
	if len(vals) != 1 || vals[0] == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(vals[0]); i++ {
		c := vals[0][i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = min(n*10+int64(c-'0'), 1<<31)
	}
	return n, true
}

// decrementMaxForwards sets the outgoing Max-Forwards of an OPTIONS
// request to one less than the client's (answerMaxForwards already
// answered zero and refused bad values).
func decrementMaxForwards(h http.Header, method string) {
	if method != http.MethodOptions {
		return
	}
	if n, ok := parseMaxForwards(h["Max-Forwards"]); ok && n > 0 {
		h["Max-Forwards"] = []string{strconv.FormatInt(n-1, 10)}
	}
}
