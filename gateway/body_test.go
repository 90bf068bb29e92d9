package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A body trickled a byte at a time keeps every single wait short, so an
// idle bound alone never fires; the rate bound shrinks the allowance as
// waiting time outgrows what the bytes received have earned.
func TestBodyAllowanceShrinksForATrickleAndNotForAFastUpload(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      int64
		waited time.Duration
		want   time.Duration
	}{
		{"first read", 0, 0, 10 * time.Second},
		{"trickle: 9 s waited for 50 bytes", 50, 9 * time.Second, 1500 * time.Millisecond},
		{"trickle: past its allowance", 50, 11 * time.Second, -500 * time.Millisecond},
		{"fast upload: 1 MB in 2 s of waiting", 1 << 20, 2 * time.Second, 10 * time.Second},
	} {
		b := &requestBody{idle: 10 * time.Second, minRate: 100, n: c.n, waited: c.waited}
		if got := b.allowance(); got != c.want {
			t.Errorf("%s: allowance %v, want %v", c.name, got, c.want)
		}
	}
	for _, off := range []*requestBody{
		{idle: 10 * time.Second, minRate: 0, n: 1, waited: time.Hour},
		{idle: 10 * time.Second, minRate: 0, n: 1, waited: 0},
		{idle: 10 * time.Second, minRate: 0, n: 0, waited: 0},
		{idle: 10 * time.Second, minRate: 0, n: 1 << 30, waited: 9 * time.Second},
	} {
		if got := off.allowance(); got != 10*time.Second {
			t.Errorf("body_min_rate 0, %d bytes in %v: allowance %v, want the idle bound", off.n, off.waited, got)
		}
	}
}

// A read whose allowance is spent to exactly zero is refused as a body
// timeout without touching the client (a zero deadline would read what
// the client already sent, past the bound).
func TestBodyReadWithNoAllowanceLeftIsATimeout(t *testing.T) {
	b := &requestBody{inner: io.NopCloser(strings.NewReader("late")), armed: true,
		idle: 10 * time.Second, minRate: 100, n: 0, waited: 10 * time.Second}
	if a := b.allowance(); a != 0 {
		t.Fatalf("allowance %v, want exactly 0 for this case", a)
	}
	n, err := b.Read(make([]byte, 8))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) || b.kind != clientBodyTimeout {
		t.Fatalf("Read = %d, %v (kind %q); want 0, a deadline error, a body timeout", n, err, b.kind)
	}
}

// A broken chunked body is the client's malformed request; a stalled one
// a timeout; one cut by the client's going away is nobody's answer.
func TestBodyErrorsAreTheClientsNotTheUpstreams(t *testing.T) {
	for err, want := range map[error]string{
		os.ErrDeadlineExceeded:                                        clientBodyTimeout,
		fmt.Errorf("read: %w", os.ErrDeadlineExceeded):                clientBodyTimeout,
		io.ErrUnexpectedEOF:                                           bodyGone,
		&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}: bodyGone,
		net.ErrClosed:                              bodyGone,
		errors.New("malformed chunked encoding"):   clientMalformedBody,
		errors.New("invalid byte in chunk length"): clientMalformedBody,
		errors.New("http chunk length too large"):  clientMalformedBody,
	} {
		if got := classifyBodyError(err); got != want {
			t.Errorf("%v: %q, want %q", err, got, want)
		}
	}
}

// After stop, a read returns at once instead of waiting on the client,
// and the body counts as unfinished (its answer closes the connection).
func TestStoppedBodyReadReturnsAtOnce(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	var b requestBody
	b.reset(pr, nil) // no writer: stop only marks the cut
	b.cut = true
	if _, err := b.Read(make([]byte, 8)); !errors.Is(err, errBodyCut) {
		t.Fatalf("read after stop: %v, want errBodyCut", err)
	}
	if !b.unfinished() {
		t.Error("a cut body counts as finished")
	}
}
