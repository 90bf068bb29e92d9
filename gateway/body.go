package gateway

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Request bodies on the public listener (docs/edge.md, "Client connections
// and request bodies"). net/http has no per-body deadline, and the server
// runs without ReadTimeout (it would cut uploads and streams), so a client
// that announces a body and never sends it held its connection for ever:
// the proxy's answer waited behind the transport's blocked read, and an
// early answer (429, 401, 404) waited behind net/http draining the unread
// body. requestBody closes that class at the one place every body passes:
//
//   - every answer written while the body is unfinished carries
//     Connection: close, so net/http never drains it before answering;
//   - when the handler is done with an unfinished body, its connection's
//     read deadline is set to now, so no drain (net/http's or
//     ReverseProxy's Close) waits on the client;
//   - on a proxied route (arm), each read is bounded by server.body_timeout
//     of waiting and the body must average server.body_min_rate bytes/s
//     once body_timeout has passed; only time blocked on the client counts.

// Body failure kinds (borda_client_errors_total{kind}).
const (
	clientBodyTimeout   = "body_timeout"   // the body stalled or trickled: 408
	clientMalformedBody = "malformed_body" // broken framing (chunked encoding): 400
	clientBadTarget     = "bad_request"    // HTTP/2 preface or a target that is not a path: 505/400
)

// errBodyCut is what a read of a body returns after the gateway stopped
// waiting for it (the handler finished, or shutdown).
var errBodyCut = errors.New("request body no longer read")

// requestBody wraps a request's body. It lives in the exchange (no
// allocation of its own); Read runs on the transport's goroutine while
// the handler's goroutine may call Close, unfinished or failure.
type requestBody struct {
	inner io.ReadCloser
	rw    http.ResponseWriter // the server's own writer, for deadlines
	rc    *http.ResponseController

	mu      sync.Mutex
	armed   bool
	idle    time.Duration // server.body_timeout
	minRate int64         // server.body_min_rate, bytes/s (0: off)
	n       int64         // bytes read
	waited  time.Duration // time spent blocked on the client
	reading bool          // a read is blocked on the client now
	eof     bool
	cut     bool
	cutWait bool      // a read was blocked on the client when stop cut it
	due     time.Time // the armed read's own deadline
	kind    string    // "", clientBodyTimeout, clientMalformedBody, or "gone"
}

// bodyGone is the failure kind of a client that went away mid-body.
const bodyGone = "gone"

func (b *requestBody) reset(inner io.ReadCloser, rw http.ResponseWriter) {
	b.inner, b.rw, b.rc = inner, rw, nil
	b.armed, b.idle, b.minRate, b.n, b.waited = false, 0, 0, 0, 0
	b.reading, b.eof, b.cut, b.cutWait, b.kind = false, false, false, false, ""
}

// arm turns on the read deadlines of a proxied route.
func (b *requestBody) arm(idle time.Duration, minRate int64) {
	b.mu.Lock()
	b.armed, b.idle, b.minRate = idle > 0, idle, minRate
	b.mu.Unlock()
}

// controller returns the ResponseController of the server's writer.
// Callers hold b.mu.
func (b *requestBody) controller() *http.ResponseController {
	if b.rc == nil {
		b.rc = http.NewResponseController(b.rw)
	}
	return b.rc
}

// allowance is how long the next read may wait on the client: the idle
// bound, shortened by the rate bound once body_timeout has been spent.
// Callers hold b.mu.
func (b *requestBody) allowance() time.Duration {
	a := b.idle
	if b.minRate > 0 {
		earned := b.idle + time.Duration(float64(b.n)/float64(b.minRate)*float64(time.Second)) - b.waited
		a = min(a, earned)
	}
	return a
}

func (b *requestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.cut {
		b.mu.Unlock()
		return 0, errBodyCut
	}
	var start time.Time
	if b.armed {
		a := b.allowance()
		if a <= 0 {
			b.kind = clientBodyTimeout
			b.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		start = time.Now()
		b.due = start.Add(a)
		_ = b.controller().SetReadDeadline(b.due) // ErrNotSupported (tests' recorders): no deadline
	}
	b.reading = true
	b.mu.Unlock()

	n, err := b.inner.Read(p)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.reading = false
	b.n += int64(n)
	if b.armed {
		b.waited += time.Since(start)
	}
	switch {
	case err == nil:
	case err == io.EOF:
		b.eof = true
		if b.armed && !b.cut {
			// net/http now reads the connection in the background to
			// notice a client that goes away; no deadline may cut that.
			_ = b.controller().SetReadDeadline(time.Time{})
		}
	case b.kind != "":
	case errors.Is(err, os.ErrDeadlineExceeded):
		// Ours when the read's own deadline passed; else stop's cut
		// (which may also win the race after net/http cancelled the
		// request on this very error).
		if b.armed && !time.Now().Before(b.due) {
			b.kind = clientBodyTimeout
		} else if b.cut {
			err = errBodyCut
		} else {
			b.kind = clientBodyTimeout
		}
	default:
		b.kind = classifyBodyError(err)
	}
	return n, err
}

// classifyBodyError tells a stalled body, a client that went away and
// broken framing apart.
func classifyBodyError(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return clientBodyTimeout
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.As(err, &ne):
		return bodyGone // *net.OpError: connection reset and the like
	}
	// net/http's chunked reader: "malformed chunked encoding", "invalid
	// byte in chunk length", "chunked encoding contains too much
	// non-data", "http chunk length too large"...
	return clientMalformedBody
}

// Close stops waiting for the rest of the body and closes it.
// ReverseProxy calls it when it is done with the request.
func (b *requestBody) Close() error {
	b.stop()
	return b.inner.Close()
}

// stop sets the connection's read deadline to now when the body is
// unfinished, so whatever still reads it (the transport, net/http's drain)
// returns at once instead of waiting on the client. Idempotent.
func (b *requestBody) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eof || b.cut || b.rw == nil {
		return
	}
	b.cut = true
	b.cutWait = b.reading
	_ = b.controller().SetReadDeadline(time.Now())
}

// unfinished reports whether the body was not read to its end.
func (b *requestBody) unfinished() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.eof
}

// failure returns the body's failure kind ("" for none) and whether a
// read is blocked on the client right now (or was when stop cut it).
func (b *requestBody) failure() (kind string, waiting bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kind, b.reading || b.cutWait
}
