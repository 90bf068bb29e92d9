package ingress

import (
	"io"
	"net/http"
	"strconv"
	"time"
)

// respond writes {"status":status} (and "reason" when set) with code and
// returns status for the metrics.
func respond(w http.ResponseWriter, code int, status, reason string) string {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	if code == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="webhook"`) // RFC 9110 §15.5.2
	}
	w.WriteHeader(code)
	if reason == "" && status == StatusPublishedConfirmed {
		_, _ = w.Write(publishedConfirmedBody) // every confirmed event: no allocation
		return status
	}
	body := `{"status":"` + status + `"}` + "\n"
	if reason != "" {
		body = `{"status":"` + status + `","reason":"` + reason + `"}` + "\n"
	}
	_, _ = io.WriteString(w, body)
	return status
}

// Shared header values of every answer (Header.Set allocates a slice per
// call). net/http only reads them (it copies the header map when the
// status is written), and their capacity is 1, so an append elsewhere
// copies instead of writing into them.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// publishedConfirmedBody is the 200 answer's body. Write must not keep
// or change it (io.Writer's contract).
var publishedConfirmedBody = []byte(`{"status":"` + StatusPublishedConfirmed + `"}` + "\n")

// respondThrottled writes the 429 AUTH_THROTTLED answer: Retry-After and
// a body with a PT-BR message for whoever reads the provider's delivery
// log, e.g. {"status":"AUTH_THROTTLED","message":"Muitas falhas de
// autenticação. Tente novamente em 3 segundos.","retry_after":3}.
func respondThrottled(w http.ResponseWriter, retryAfter int) string {
	h := w.Header()
	n := strconv.Itoa(retryAfter)
	h.Set("Retry-After", n)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = io.WriteString(w, `{"status":"`+StatusAuthThrottled+`","message":"Muitas falhas de autenticação. Tente novamente em `+
		n+` segundos.","retry_after":`+n+"}\n")
	return StatusAuthThrottled
}

// retryAfterSeconds rounds d up to whole seconds, at least 1 (RFC 9110
// §10.2.3 Retry-After is in seconds).
func retryAfterSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// readBody reads r whole and returns its bytes, or the reader's error
// unwrapped (*http.MaxBytesError past the limit, os.ErrDeadlineExceeded
// past body_timeout). hint is the Content-Length (-1 unknown): with it,
// one allocation of hint + 512 bytes (bytes.MinRead: room to see EOF).
// Without it (chunked bodies, and every body of a source authenticated by
// its signature alone, unauthenticated until verified) the body is read
// into chunks that double from 4 KiB up to 1 MiB and joined once: memory
// follows the bytes that arrive, and a 10 MB body costs about 2 × its
// size, where a doubling bytes.Buffer costs 3.2 × and keeps 16 MiB
// (TestTenMegabyteChunkedBodyAllocationsStayBounded).
func readBody(r io.Reader, hint int64) ([]byte, error) {
	return readBodyInto(r, hint, nil)
}

// readBodyInto is readBody reading an announced body into spare when it
// fits (cap(spare) > hint): the ingress's pooled buffer (scratch.go).
func readBodyInto(r io.Reader, hint int64, spare []byte) ([]byte, error) {
	if hint > 0 {
		return readSized(r, hint, spare)
	}
	const first, largest = 4 << 10, 1 << 20
	var chunks [][]byte
	total := 0
	for size := first; ; size = min(2*size, largest) {
		chunk := make([]byte, size)
		n, err := fill(r, chunk)
		chunk = chunk[:n]
		total += n
		if err == io.EOF { // only the reader's own EOF ends the body
			if len(chunks) == 0 {
				return chunk, nil // one chunk: nothing to join
			}
			out := make([]byte, 0, total)
			for _, c := range chunks {
				out = append(out, c...)
			}
			return append(out, chunk...), nil
		}
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, chunk)
	}
}

// readSized reads a body that announced hint bytes into one allocation
// of hint bytes (plus one, to see that the body ends there). A body that
// turns out longer continues as an unannounced one; a shorter one is what
// it is (net/http reports a Content-Length body cut short as
// io.ErrUnexpectedEOF). spare is used instead of a new allocation when
// it has room for hint + 1 bytes.
func readSized(r io.Reader, hint int64, spare []byte) ([]byte, error) {
	var buf []byte
	if int64(cap(spare)) > hint {
		buf = spare[:hint+1]
	} else {
		buf = make([]byte, hint+1)
	}
	n, err := fill(r, buf[:hint])
	if err == io.EOF {
		return buf[:n], nil
	}
	if err != nil {
		return nil, err
	}
	for {
		m, err := r.Read(buf[hint:])
		if m > 0 {
			rest, err := readBody(r, -1)
			if err != nil {
				return nil, err
			}
			return append(buf, rest...), nil
		}
		if err == io.EOF {
			return buf[:hint], nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// fill reads into b until it is full (nil error) or r fails. Unlike
// io.ReadFull it returns r's error as it is: io.ErrUnexpectedEOF from
// net/http (a client that hung up inside a chunked or Content-Length
// body) must stay an error, never read as the end of a complete body.
func fill(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
