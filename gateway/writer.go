package gateway

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"time"
)

// responseWriter is the one ResponseWriter wrapper of the chain. It
// records the status and byte count for logs, metrics and telemetry, and
// merges Vary: Origin into the final headers of CORS routes. Every other
// capability of the underlying writer stays reachable: Flush and Hijack
// are implemented directly (so ReverseProxy's flushes and WebSocket
// upgrades work), and Unwrap lets http.ResponseController reach the rest
// (deadlines, EnableFullDuplex). Trailers pass through Header() as the
// standard library expects.
type responseWriter struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
	hijacked    bool
	varyOrigin  bool
	// body is the request's body when it has one: an answer written
	// while it is unfinished closes the connection (body.go).
	body *requestBody
	// relaying is set while the proxy waits for the upstream's answer
	// (routeProxy.ServeHTTP until modifyResponse or errorHandler): then
	// Header is relayed, a map of the upstream's 1xx headers apart from
	// the chain's own. ReverseProxy relays a 1xx by copying its headers
	// into Header(), writing it and clearing that map: on the response's
	// own map that wiped the request id, CORS and rate-limit headers off
	// the final answer.
	relaying bool
	relayed  http.Header // allocated by the first relayed 1xx only
	// relayPolicy is the route's response-header policy, applied to each
	// relayed 1xx before it is sent (routeProxy.dropEdgeOwned): the
	// same removals as the final answer's.
	relayPolicy func(h http.Header, status int)
	// wd sets the connection's write deadline (net/http's and x/net/http2's
	// writers have it; nil for others), sendTimeout is server.send_timeout:
	// every write is armed with it (armSend).
	wd          writeDeadliner
	sendTimeout time.Duration
}

// writeDeadliner is the write-deadline method of net/http's response
// writers (what http.ResponseController calls).
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// armSend gives the next write to the client server.send_timeout to
// progress (nginx send_timeout: a timeout between two successive writes):
// a client that reads nothing for that long fails the write, which ends
// the exchange and releases the upstream connection (attack pass A83).
// It is armed before every header, body write and flush, and once more
// when the proxy ends (the server's last flush), so a keep-alive
// connection never carries a stale deadline into its next response.
func (w *responseWriter) armSend() {
	if w.wd != nil && w.sendTimeout > 0 && !w.hijacked {
		_ = w.wd.SetWriteDeadline(time.Now().Add(w.sendTimeout))
	}
}

// Header is the response's header map, or while relaying the map of the
// upstream's next 1xx.
func (w *responseWriter) Header() http.Header {
	if w.relaying {
		if w.relayed == nil {
			w.relayed = make(http.Header)
		}
		return w.relayed
	}
	return w.ResponseWriter.Header()
}

// endRelay ends the relaying phase: the upstream's final answer (or the
// gateway's error) goes on the response's own map.
func (w *responseWriter) endRelay() { w.relaying, w.relayed = false, nil }

// writeRelayed sends a relayed 1xx: the chain's headers, then the
// upstream's after the route's response-header policy (relayPolicy), and
// never its Set-Cookie or X-Request-Id (the route's cookie policy never
// sees a 1xx, and the request id is the edge's), and leaves the
// response's map as it was.
func (w *responseWriter) writeRelayed(code int) {
	h := w.ResponseWriter.Header()
	type prior struct {
		name string
		vals []string // nil: absent
	}
	var saved []prior
	if w.relayPolicy != nil {
		w.relayPolicy(w.relayed, code)
	}
	for k, v := range w.relayed {
		if k == "Set-Cookie" || k == "X-Request-Id" {
			continue
		}
		own := h[k]
		saved = append(saved, prior{k, own})
		h[k] = append(own[:len(own):len(own)], v...) // a copy: own is left intact
	}
	w.ResponseWriter.WriteHeader(code)
	for _, p := range saved {
		if p.vals == nil {
			delete(h, p.name)
		} else {
			h[p.name] = p.vals
		}
	}
}

func (w *responseWriter) reset(rw http.ResponseWriter, sendTimeout time.Duration) {
	*w = responseWriter{ResponseWriter: rw, sendTimeout: sendTimeout}
	w.wd, _ = rw.(writeDeadliner)
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// WriteHeader records the final status. Informational statuses (103 Early
// Hints and the like) pass through without counting as the final one;
// 101 is final.
func (w *responseWriter) WriteHeader(code int) {
	w.armSend()
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		// ReverseProxy copies a 1xx's headers here without ModifyResponse,
		// so the route's Set-Cookie policy never sees them: an upstream's
		// 103 must not carry olp_* cookies past it (docs/edge.md, Cookies).
		if w.relaying {
			w.writeRelayed(code)
			return
		}
		delete(w.Header(), "Set-Cookie")
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	w.status = code
	if w.body != nil && code != http.StatusSwitchingProtocols && w.body.unfinished() {
		// Without it net/http drains the unread body before sending
		// this answer, waiting on a client that may never send it.
		w.Header()["Connection"] = []string{"close"}
	}
	if w.varyOrigin {
		mergeVary(w.Header(), "Origin")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.armSend()
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush sends buffered data to the client at once (SSE, chunked streams).
func (w *responseWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.armSend()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
		return
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over (WebSocket and other upgrades). A
// hijack before any status counts as 101 Switching Protocols, which is
// what ReverseProxy writes on the hijacked connection.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		// A tunnel (WebSocket) is not a response: no send deadline on it.
		_ = conn.SetWriteDeadline(time.Time{})
		w.hijacked = true
		if !w.wroteHeader {
			w.wroteHeader = true
			w.status = http.StatusSwitchingProtocols
		}
	}
	return conn, brw, err
}

// statusOr returns the recorded status, or def when nothing was written.
func (w *responseWriter) statusOr(def int) int {
	if w.status == 0 {
		return def
	}
	return w.status
}

// mergeVary rewrites the Vary field of h as one line with token added:
// every token of every Vary line kept once (case-insensitively), in
// order; "*" is left alone (it already varies on everything).
func mergeVary(h http.Header, token string) {
	lines := h["Vary"]
	if len(lines) == 0 {
		h["Vary"] = []string{token}
		return
	}
	if len(lines) == 1 && !strings.Contains(lines[0], ",") {
		v := strings.TrimSpace(lines[0])
		if v == "*" || strings.EqualFold(v, token) {
			return
		}
	}
	seen := make([]string, 0, 4)
	has := func(t string) bool {
		for _, s := range seen {
			if strings.EqualFold(s, t) {
				return true
			}
		}
		return false
	}
	for _, line := range lines {
		for t := range strings.SplitSeq(line, ",") {
			if t = strings.TrimSpace(t); t == "*" {
				h["Vary"] = []string{"*"}
				return
			}
			if t != "" && !has(t) {
				seen = append(seen, t)
			}
		}
	}
	if !has(token) {
		seen = append(seen, token)
	}
	h["Vary"] = []string{strings.Join(seen, ", ")}
}
