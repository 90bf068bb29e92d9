package ingress

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// A client that hangs up inside a chunked body makes net/http's body
// reader return io.ErrUnexpectedEOF. readBody's chunked path first used
// io.ReadFull, which reports a short read with that same error, and took
// it for the end of the body: a truncated form-urlencoded event (no JSON
// check to catch it) was published and answered 200 PUBLISHED_CONFIRMED.
func TestTruncatedBodyIsRefusedNotPublishedShorter(t *testing.T) {
	for _, size := range []int{0, 16, 4096, 5000, 3<<20 + 7} {
		for _, hint := range []int64{-1, int64(size) + 10} {
			body := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("a"), size)), iotest.ErrReader(io.ErrUnexpectedEOF))
			if got, err := readBody(body, hint); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("readBody(%d bytes then a hang-up, hint %d) = %d bytes, %v; want io.ErrUnexpectedEOF", size, hint, len(got), err)
			}
		}
	}

	pub := &fakePublisher{}
	i, _ := newUnitIngress(t, unitConfig(), pub)
	cut := io.MultiReader(strings.NewReader("event=messages.upsert&id=trunc-1&text=ol"), iotest.ErrReader(io.ErrUnexpectedEOF))
	r := httptest.NewRequest(http.MethodPost, "/webhooks/whatsapp", hideLength{cut})
	r.ContentLength = -1
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Authorization", "Bearer test-token")
	w := httptest.NewRecorder()
	i.ServeHTTP(w, r)
	expect(t, w, http.StatusBadRequest, StatusInvalidPayload)
	if n := len(pub.msgs); n != 0 {
		t.Errorf("a truncated body was published (%d messages)", n)
	}
}

// Whole bodies of every size around the chunk boundaries come back byte
// for byte, with and without a Content-Length.
func TestReadBodyKeepsEveryByte(t *testing.T) {
	for _, size := range []int{0, 1, 4095, 4096, 4097, 12288, 28672, 3<<20 + 7} {
		want := make([]byte, size)
		for k := range want {
			want[k] = byte(k * 7)
		}
		for _, rd := range []func() io.Reader{
			func() io.Reader { return bytes.NewReader(want) },
			func() io.Reader { return iotest.OneByteReader(bytes.NewReader(want)) },
			func() io.Reader { return iotest.DataErrReader(bytes.NewReader(want)) },
			func() io.Reader { return iotest.HalfReader(bytes.NewReader(want)) },
		} {
			for _, hint := range []int64{-1, int64(size)} {
				got, err := readBody(rd(), hint)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("size %d hint %d: %d bytes, %v", size, hint, len(got), err)
				}
			}
		}
	}
}
