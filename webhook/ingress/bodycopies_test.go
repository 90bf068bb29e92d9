package ingress

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
)

// bigBody returns a JSON Evolution-style event of exactly n bytes whose
// id fields give the event id "i:messages.upsert:<id>".
func bigBody(t *testing.T, n int, id string) []byte {
	t.Helper()
	head := fmt.Sprintf(`{"instance":"i","event":"messages.upsert","data":{"key":{"id":%q},"text":"`, id)
	const tail = `"}}`
	fill := n - len(head) - len(tail)
	if fill < 0 {
		t.Fatalf("body of %d bytes is too small", n)
	}
	b := make([]byte, 0, n)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte("a"), fill)...)
	return append(b, tail...)
}

// hideLength hides the reader's type from httptest.NewRequest, so the
// request has no Content-Length (as a chunked one does).
type hideLength struct{ io.Reader }

// bodyAllocs serves one authenticated request carrying body (with its
// Content-Length, or none when chunked) and returns the bytes allocated
// meanwhile (TotalAlloc: counts every allocation, whatever the GC does).
func bodyAllocs(t *testing.T, i *Ingress, body []byte, chunked bool) uint64 {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = hideLength{rd}
	}
	r := httptest.NewRequest(http.MethodPost, "/webhooks/whatsapp", rd)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer test-token")
	if chunked {
		r.ContentLength = -1
	} else if r.ContentLength != int64(len(body)) {
		t.Fatalf("request Content-Length %d, want %d", r.ContentLength, len(body))
	}
	w := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	i.ServeHTTP(w, r)
	runtime.ReadMemStats(&after)
	expect(t, w, http.StatusOK, StatusPublishedConfirmed)
	return after.TotalAlloc - before.TotalAlloc
}

// Issue 6: a 10 MB body is not copied more than needed. With its
// Content-Length, an authenticated request's body is read once into a
// buffer of that size and base64-encoded once, straight into the envelope
// (envelope.Encode sizes its buffer up front): about 1 + 4/3 bodies. A
// third full copy (reading through a growing buffer, an io.ReadAll, a
// string conversion, json.Marshal's buffer plus its copy) would exceed the
// bound.
func TestTenMegabyteBodyIsReadOnceAndEncodedOnce(t *testing.T) {
	cfg := unitConfig()
	pub := &fakePublisher{idsOnly: true}
	i, _ := newUnitIngress(t, cfg, pub)
	n := int(cfg.MaxBodyBytes) - 1024 // just under the 10 MB cap
	warm, body := bigBody(t, n, "WARMUP"), bigBody(t, n, "MEASURED")

	bodyAllocs(t, i, warm, false) // pools, metric series, dedup entry
	got := bodyAllocs(t, i, body, false)
	limit := uint64(float64(n)*(1+1.40)) + 2<<20
	t.Logf("%d-byte body with Content-Length: %d bytes allocated (%.2f × body), bound %d (%.2f × body)",
		n, got, float64(got)/float64(n), limit, float64(limit)/float64(n))
	if got > limit {
		t.Errorf("one %d-byte request allocated %d bytes (%.2f × body), want ≤ %d: the body is copied more than read once + base64 once",
			n, got, float64(got)/float64(n), limit)
	}
	msgs := pub.messages()
	if len(msgs) != 2 || msgs[1].ID != bindBody("i:messages.upsert:MEASURED", body) {
		t.Fatalf("published %d messages, want the warm-up and the measured one", len(msgs))
	}
}

// Without a Content-Length (chunked; also any request to a source
// authenticated by its signature alone, whose Content-Length is not
// trusted before the signature is verified), readBody reads chunks that
// double up to 1 MiB and joins them once: about 2 × body, plus the
// envelope's 4/3. It grew a bytes.Buffer by doubling before: 4.5 × body in
// all (7.7 × under -race), keeping a 16 MiB buffer for a 10 MB body.
func TestTenMegabyteChunkedBodyAllocationsStayBounded(t *testing.T) {
	cfg := unitConfig()
	i, _ := newUnitIngress(t, cfg, &fakePublisher{idsOnly: true})
	n := int(cfg.MaxBodyBytes) - 1024
	bodyAllocs(t, i, bigBody(t, n, "WARMUP"), true)
	got := bodyAllocs(t, i, bigBody(t, n, "MEASURED"), true)
	limit := uint64(2*n) + uint64(1.40*float64(n)) + 2<<20 // chunks + join, base64, slack (the last chunk's spare)
	t.Logf("%d-byte body without Content-Length: %d bytes allocated (%.2f × body)", n, got, float64(got)/float64(n))
	if got > limit {
		t.Errorf("one %d-byte chunked request allocated %d bytes (%.2f × body), want ≤ %d (2 × body read and joined, 1.4 × base64, 2 MiB)",
			n, got, float64(got)/float64(n), limit)
	}
}
