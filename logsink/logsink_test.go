package logsink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/clock"
)

// recorder is an output that records each write(2)-equivalent call and
// can be stalled.
type recorder struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	gate   chan struct{} // when non-nil, each Write waits for it to close
	// held, when non-nil, receives (without blocking) each time a Write
	// starts waiting at gate.
	held chan struct{}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	gate, held := r.gate, r.held
	r.mu.Unlock()
	if gate != nil {
		select {
		case held <- struct{}{}:
		default:
		}
		<-gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	return r.buf.Write(p)
}

func (r *recorder) snapshot() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String(), r.writes
}

func TestLinesArriveInOrderInFewWrites(t *testing.T) {
	out := &recorder{}
	w := New(out, Options{FlushEvery: time.Hour})
	var want strings.Builder
	for i := range 1000 {
		line := fmt.Sprintf("{\"n\":%d}\n", i)
		want.WriteString(line)
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, writes := out.snapshot()
	if got != want.String() {
		t.Fatalf("output differs from the lines written, in order (%d vs %d bytes)", len(got), want.Len())
	}
	if writes > 2 {
		t.Errorf("%d writes to the output for 1000 lines of ~10 bytes; want them batched (≤ 2)", writes)
	}
}

func TestTickWritesPendingLines(t *testing.T) {
	out := &recorder{}
	w := New(out, Options{FlushEvery: 5 * time.Millisecond})
	defer w.Close()
	_, _ = w.Write([]byte("one\n"))
	waitOutput(t, out, "one\n", "a pending line was not written by the tick")
}

// waitOutput waits up to 5 s for out to hold exactly want.
func waitOutput(t *testing.T, out *recorder, want, failure string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, _ := out.snapshot(); got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(failure)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFlushBytesStartsAWriteBeforeTheTick(t *testing.T) {
	out := &recorder{}
	w := New(out, Options{FlushEvery: time.Hour, FlushBytes: 8})
	defer w.Close()
	_, _ = w.Write([]byte("0123456789\n"))
	waitOutput(t, out, "0123456789\n", "FlushBytes pending did not start a write")
}

// The bug this package fixes: a stalled log output (a container log
// driver, a full pipe) stalled every request that logged.
func TestStalledOutputNeverBlocksWriteAndDropsAreReported(t *testing.T) {
	gate := make(chan struct{})
	out := &recorder{gate: gate}
	frozen := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w := New(out, Options{FlushEvery: time.Millisecond, FlushBytes: 16, MaxBytes: 64, Clock: clock.Func(func() time.Time { return frozen })})

	// The loop takes the first batch and stalls in out.Write; from then
	// on, at most MaxBytes are held and the rest is dropped.
	line := []byte("0123456789abcde\n") // 16 bytes
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			if n, err := w.Write(line); n != len(line) || err != nil {
				t.Errorf("Write = %d, %v", n, err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Write blocked on a stalled output")
	}
	if w.Dropped() == 0 {
		t.Fatal("nothing counted as dropped with the output stalled and 16 KB written into 64 bytes")
	}
	close(gate) // the output recovers
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := out.snapshot()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	var kept, notices uint64
	var reported uint64
	for _, l := range lines {
		if l == string(line[:len(line)-1]) {
			kept++
			continue
		}
		var n struct {
			Time, Level, Msg string
			Dropped          uint64
		}
		if err := json.Unmarshal([]byte(l), &n); err != nil || n.Level != "WARN" || n.Time != "2026-11-30T12:00:00Z" {
			t.Fatalf("unexpected line %q (%v)", l, err)
		}
		notices++
		reported += n.Dropped
	}
	if notices == 0 || reported != w.Dropped() || kept+reported != 1000 {
		t.Fatalf("kept %d + reported dropped %d (in %d notices), Dropped() %d; want every one of 1000 lines kept or reported", kept, reported, notices, w.Dropped())
	}
}

func TestWritesAfterCloseAreSynchronousAndOrdered(t *testing.T) {
	out := &recorder{}
	w := New(out, Options{FlushEvery: time.Hour})
	_, _ = w.Write([]byte("before\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, _ = w.Write([]byte("after\n"))
	if got, _ := out.snapshot(); got != "before\nafter\n" {
		t.Fatalf("output %q", got)
	}
}

func TestConcurrentSlogLinesStayWhole(t *testing.T) {
	out := &recorder{}
	w := New(out, Options{FlushEvery: time.Millisecond, FlushBytes: 512})
	log := slog.New(slog.NewJSONHandler(w, nil))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				log.Info("http request", "g", g, "i", i)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := out.snapshot()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 4000 {
		t.Fatalf("%d lines, want 4000", len(lines))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("torn line %q", l)
		}
	}
}

// BenchmarkAccessLogLine is slog's access-log line written straight to a
// pipe (one write(2) per line, the process's stderr before logsink)
// against the same line through a Writer in front of that pipe.
func BenchmarkAccessLogLine(b *testing.B) {
	for _, mode := range []string{"direct", "logsink"} {
		b.Run(mode, func(b *testing.B) {
			r, pw, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, r) }()
			defer r.Close()
			defer pw.Close()
			var out io.Writer = pw
			if mode == "logsink" {
				w := New(pw, Options{})
				defer w.Close()
				out = w
			}
			log := slog.New(slog.NewJSONHandler(out, nil))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					log.Info("http request", "route", "portal", "method", "GET", "status", 200, "duration_s", 0.0012)
				}
			})
		})
	}
}

// Review finding: Close waited for ever on an output that stopped taking
// writes, so `borda serve` never reached os.Exit after SIGTERM and its
// pod stayed Terminating until SIGKILL.
func TestCloseGivesUpOnAStalledOutput(t *testing.T) {
	for _, stalled := range []string{"during a background write", "at the final flush"} {
		t.Run(stalled, func(t *testing.T) {
			gate := make(chan struct{})
			defer close(gate)
			out := &recorder{}
			every := time.Hour
			if stalled == "during a background write" {
				every = time.Millisecond
			}
			w := New(out, Options{FlushEvery: every, CloseTimeout: 50 * time.Millisecond})
			held := make(chan struct{}, 1)
			out.mu.Lock()
			out.gate, out.held = gate, held
			out.mu.Unlock()
			_, _ = w.Write([]byte("stuck\n"))
			if stalled == "during a background write" {
				select { // the background write is now stuck in the output
				case <-held:
				case <-time.After(10 * time.Second):
					t.Fatal("no background write reached the output within 10 s")
				}
			}
			// ErrCloseTimeout comes only from Close's CloseTimeout timer:
			// it proves Close gave up on the stalled output (a Close that
			// waited for it would block here until the test's timeout).
			if err := w.Close(); !errors.Is(err, ErrCloseTimeout) {
				t.Errorf("Close = %v, want ErrCloseTimeout", err)
			}
			// Writes after a Close that gave up still never block.
			done := make(chan struct{})
			go func() { _, _ = w.Write([]byte("later\n")); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Error("Write blocked after Close gave up")
			}
		})
	}
}

// failing is an output whose first write fails.
type failing struct {
	recorder
	failed bool
}

func (f *failing) Write(p []byte) (int, error) {
	if !f.failed {
		f.failed = true
		return 0, errors.New("write /dev/stderr: broken pipe")
	}
	return f.recorder.Write(p)
}

// Review finding: a batch the output refused was thrown away without
// being counted in borda_log_lines_dropped_total or reported.
func TestRefusedBatchIsCountedAndReported(t *testing.T) {
	out := &failing{}
	w := New(out, Options{FlushEvery: time.Hour})
	_, _ = w.Write([]byte("a\n"))
	_, _ = w.Write([]byte("b\n"))
	if err := w.Flush(); err == nil {
		t.Fatal("Flush on a failing output returned nil")
	}
	if got := w.Dropped(); got != 2 {
		t.Errorf("Dropped() = %d after a refused batch of 2 lines, want 2", got)
	}
	_, _ = w.Write([]byte("c\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := out.snapshot()
	if !strings.HasPrefix(got, "c\n") || !strings.Contains(got, `"dropped":2`) {
		t.Errorf("output %q, want c then a notice of 2 dropped lines", got)
	}
}

// When the output stalls, the access log fills MaxBytes first; the
// warnings and errors that explain the incident still get in, up to a
// reserve of a quarter more.
func TestWarningsOutlastTheAccessLogWhenTheOutputStalls(t *testing.T) {
	out := &stalledOutput{entered: make(chan struct{}, 1), release: make(chan struct{})}
	w := New(out, Options{FlushEvery: time.Hour, FlushBytes: 1 << 20, MaxBytes: 400})
	defer func() { close(out.release); _ = w.Close() }()
	// Stall the output first: a line of MaxBytes kicks a flush, which takes
	// it and blocks in the output, so no later flush can empty the
	// pending lines behind the test's back (the reserve kicks one).
	_, _ = w.Write(append(bytes.Repeat([]byte("s"), 399), '\n'))
	<-out.entered
	info := []byte(`{"level":"INFO","msg":"http request","pad":"` + strings.Repeat("x", 60) + "\"}\n")
	for range 10 {
		_, _ = w.Write(info) // ~100 bytes each: the fifth and later do not fit
	}
	before := w.Dropped()
	if before == 0 {
		t.Fatal("nothing dropped: MaxBytes not reached")
	}
	// 324 bytes pending; this 120-byte line fits only in the reserve.
	_, _ = w.Write([]byte(`{"level":"ERROR","msg":"rate-limit store failed","pad":"` + strings.Repeat("e", 62) + "\"}\n"))
	if w.Dropped() != before {
		t.Error("an error line was dropped while the reserve had room")
	}
	_, _ = w.Write(info)
	if w.Dropped() != before+1 {
		t.Error("an info line used the reserve")
	}
	for range 3 {
		_, _ = w.Write([]byte(`{"level":"WARN","msg":"` + strings.Repeat("w", 40) + "\"}\n"))
	}
	if w.Dropped() == before+1 {
		t.Error("warnings beyond the reserve were not dropped: the reserve is unbounded")
	}
}

// stalledOutput blocks every Write until release is closed, and says
// when a Write has entered.
type stalledOutput struct {
	entered chan struct{}
	release chan struct{}
}

func (o *stalledOutput) Write(p []byte) (int, error) {
	select {
	case o.entered <- struct{}{}:
	default:
	}
	<-o.release
	return len(p), nil
}
