package ingress

import "io"

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
