package logsink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an output that records each write(2)-equivalent call and
// can be stalled.
type recorder struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	gate   chan struct{} // when non-nil, each Write waits for it to close
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
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
	w := New(out, Options{FlushEvery: time.Millisecond, FlushBytes: 16, MaxBytes: 64, Now: func() time.Time { return frozen }})

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
