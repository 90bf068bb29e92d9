// Package logsink provides the process log's output: a writer that takes
// whole log lines from slog without ever waiting on the real output, and
// writes them in batches from one background goroutine.
//
// Why: `borda serve` logs one line per request (the access log, at info).
// Written straight to stderr, every request pays a write(2) on its own
// goroutine, about 12 % of a saturated single-core proxy here, and when
// stderr is a pipe whose reader stalls (a container log driver under
// pressure, a full journald) every request in the gateway stops with it.
// nginx (`access_log … buffer= flush=`) and Envoy (access-log flush
// interval) buffer for the same reasons. zerolog's diode writer was
// considered: it never blocks either, but writes each line with its own
// write(2), so the syscall cost stays.
//
// Semantics: Write copies the line into a bounded buffer (MaxBytes) and
// returns at once; the buffer is written to the output every FlushEvery,
// or sooner once it holds FlushBytes. A line that does not fit (the
// output has been stalled long enough to fill MaxBytes) is dropped and
// counted, never waited for; warnings and errors have a reserve of a
// quarter of MaxBytes more, so they outlast the access log; once the output takes writes again a notice
// line says how many were dropped. A batch the output refuses (a write
// error) is counted as dropped too. Close writes what is pending and
// makes later Writes synchronous, so nothing logged during shutdown is
// lost; it gives up after CloseTimeout when the output is stalled, so a
// stuck stderr cannot hold the process's exit. What a crash (SIGKILL, a
// fatal runtime error) loses is at most the last FlushEvery of lines.
package logsink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

// Defaults of New's zero Options.
const (
	// DefaultFlushEvery is how long a line waits at most before it is
	// written (100 ms: live enough for `tail -f`).
	DefaultFlushEvery = 100 * time.Millisecond
	// DefaultFlushBytes starts a write before the tick once this many
	// bytes are pending (64 KiB, about 250 access-log lines).
	DefaultFlushBytes = 64 << 10
	// DefaultMaxBytes is the most held while the output is slow (4 MiB,
	// about 1.5 s of access log at 10 000 req/s); beyond it lines are
	// dropped and counted.
	DefaultMaxBytes = 4 << 20
	// DefaultCloseTimeout bounds Close on a stalled output (5 s).
	DefaultCloseTimeout = 5 * time.Second
)

// ErrCloseTimeout is Close's error when the output did not take the
// pending lines within CloseTimeout; they are abandoned.
var ErrCloseTimeout = errors.New("logsink: output stalled; pending log lines abandoned at close")

// Options tunes a Writer; zero fields take the defaults above.
type Options struct {
	FlushEvery time.Duration // longest a line waits before it is written
	FlushBytes int           // pending bytes that start a write early
	MaxBytes   int           // pending bytes held at most; beyond: dropped
	// CloseTimeout bounds Close's wait for a stalled output.
	CloseTimeout time.Duration
	// Clock stamps the dropped-lines notice; tests freeze it (nil: the
	// wall clock).
	Clock clock.Clock
}

// Writer is an io.Writer for slog handlers (one Write per line). It is
// safe for concurrent use. Create it with New, end it with Close.
type Writer struct {
	out  io.Writer
	opts Options

	mu      sync.Mutex
	pending []byte
	dropped uint64 // lines dropped since the last notice
	closed  bool

	outMu sync.Mutex // one write to out at a time, in order
	spare []byte     // the buffer last written, reused (guarded by outMu)

	droppedTotal atomic.Uint64
	kick         chan struct{}
	stop         chan struct{}
	done         chan struct{}
	closeOnce    sync.Once
}

// New starts a Writer in front of out (usually os.Stderr) and its
// background goroutine; Close stops it.
func New(out io.Writer, opts Options) *Writer {
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = DefaultFlushEvery
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.FlushBytes <= 0 || opts.FlushBytes > opts.MaxBytes {
		opts.FlushBytes = min(DefaultFlushBytes, opts.MaxBytes)
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = DefaultCloseTimeout
	}
	w := &Writer{
		out:  out,
		opts: opts,
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go w.loop()
	return w
}

// Write queues p (one whole line) and returns len(p), nil without
// waiting on the output. When MaxBytes are already pending, p is dropped
// and counted (see Dropped). After Close, p is written synchronously and
// the output's error is returned.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.outMu.Lock()
		defer w.outMu.Unlock()
		return w.out.Write(p)
	}
	if n := len(w.pending) + len(p); n > w.opts.MaxBytes && (n > w.opts.MaxBytes+w.opts.MaxBytes/4 || !important(p)) {
		w.dropped++
		w.mu.Unlock()
		w.droppedTotal.Add(1)
		return len(p), nil
	}
	w.pending = append(w.pending, p...)
	early := len(w.pending) >= w.opts.FlushBytes
	w.mu.Unlock()
	if early {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// important reports whether line is a warning or an error of slog's JSON
// handler: those may use a reserve of MaxBytes/4 beyond MaxBytes, so the
// lines that explain an incident outlast the access log's when the
// output stalls.
func important(line []byte) bool {
	return bytes.Contains(line, []byte(`"level":"ERROR`)) || bytes.Contains(line, []byte(`"level":"WARN`))
}

// Dropped is the number of lines dropped since New: while MaxBytes were
// pending (the output too slow, or a line longer than MaxBytes), or in a
// batch the output refused.
func (w *Writer) Dropped() uint64 { return w.droppedTotal.Load() }

// Flush writes what is pending now and returns the output's error.
func (w *Writer) Flush() error {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	return w.flushLocked()
}

// flushLocked is Flush with outMu held.
func (w *Writer) flushLocked() error {
	w.mu.Lock()
	batch, dropped := w.pending, w.dropped
	w.pending, w.dropped = w.spare[:0], 0
	w.mu.Unlock()
	lines := len(batch)
	if dropped > 0 {
		batch = fmt.Appendf(batch, "{\"time\":%q,\"level\":\"WARN\",\"msg\":\"log lines dropped: the log output was too slow or refused them\",\"dropped\":%d}\n",
			w.opts.Clock.Now().UTC().Format(time.RFC3339Nano), dropped)
	}
	var err error
	if len(batch) > 0 {
		if _, err = w.out.Write(batch); err != nil {
			// Nothing of the batch is known to have arrived: count its
			// lines as dropped and report them, with the earlier ones,
			// once the output takes writes again.
			lost := uint64(bytes.Count(batch[:lines], []byte{'\n'}))
			w.droppedTotal.Add(lost)
			w.mu.Lock()
			w.dropped += dropped + lost
			w.mu.Unlock()
		}
	}
	w.spare = batch[:0]
	return err
}

// Close writes what is pending, stops the background goroutine and
// makes later Writes synchronous. It returns the last write's error, or
// ErrCloseTimeout when a write in progress did not finish within
// CloseTimeout (then the pending lines are abandoned and Writes keep
// buffering). It is safe to call more than once.
func (w *Writer) Close() error {
	var err error
	w.closeOnce.Do(func() {
		close(w.stop)
		finished := make(chan error, 1)
		go func() {
			<-w.done
			// Writes turn synchronous only once the output has taken the
			// pending lines: on a stalled output they keep buffering
			// (bounded, never blocking). Holding outMu keeps a synchronous
			// Write behind the lines of both flushes.
			w.outMu.Lock()
			defer w.outMu.Unlock()
			err := w.flushLocked()
			w.mu.Lock()
			w.closed = true
			w.mu.Unlock()
			if err2 := w.flushLocked(); err == nil { // lines queued during the first
				err = err2
			}
			finished <- err
		}()
		t := time.NewTimer(w.opts.CloseTimeout)
		defer t.Stop()
		select {
		case err = <-finished:
		case <-t.C:
			err = ErrCloseTimeout
		}
	})
	return err
}

// loop writes the pending lines every FlushEvery, or when kicked.
func (w *Writer) loop() {
	defer close(w.done)
	t := time.NewTicker(w.opts.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.kick:
		}
		_ = w.Flush() // an output that fails has nowhere to report to
	}
}
