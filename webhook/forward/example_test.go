package forward_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/olp-edu/borda/webhook/forward"
)

// signedRequest is a POST as the forwarder sends it, signed with secret
// in both versions.
func signedRequest(secret []byte) *http.Request {
	body, now := `{"a":1}`, time.Now()
	r := httptest.NewRequest(http.MethodPost, "/legacy/webhook", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "evt-42")
	r.Header.Set(forward.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	r.Header.Set(forward.HeaderSignature, forward.Sign(secret, now, []byte(body)))
	r.Header.Set(forward.HeaderSignatureV2, forward.SignV2(secret, now, "evt-42", "application/json", []byte(body)))
	return r
}

// ExampleVerify is the legacy endpoint's check of a forwarded POST
// (docs/forwarder.md, "Verifying on the receiving side"), with secret
// the bytes of LEGACY_WEBHOOK_HMAC_SECRET.
func ExampleVerify() {
	secret := []byte("s3cret")
	handle := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 10<<20)) // raw bytes, before any parsing
		err := forward.Verify(r.Header.Get("X-Webhook-Timestamp"), r.Header.Get("X-Webhook-Signature"),
			body, time.Now(), secret)
		// err: ErrMissingSignature, ErrBadTimestamp, ErrStaleTimestamp (older than 5 min, or more
		// than 5 min in the future), ErrBadSignature. Then deduplicate by Idempotency-Key.
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "verified", r.Header.Get("Idempotency-Key"))
	}
	w := httptest.NewRecorder()
	handle(w, signedRequest(secret))
	fmt.Print(w.Body.String())
	// Output: verified evt-42
}

// ExampleVerifyV2 is the same check of the version-2 signature, which
// also covers the Idempotency-Key and Content-Type headers.
func ExampleVerifyV2() {
	secret := []byte("s3cret")
	handle := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 10<<20))
		err := forward.VerifyV2(r.Header.Get("X-Webhook-Timestamp"), r.Header.Get("X-Webhook-Signature-V2"),
			r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"),
			body, time.Now(), secret)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "verified", r.Header.Get("Idempotency-Key"))
	}
	w := httptest.NewRecorder()
	handle(w, signedRequest(secret))
	r := signedRequest(secret)
	r.Header.Set("Idempotency-Key", "evt-43") // a changed key: the V2 signature no longer matches
	handle(w, r)
	fmt.Print(w.Body.String())
	// Output:
	// verified evt-42
	// forward: signature does not match
}
