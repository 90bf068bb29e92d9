package forward

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"
)

// An empty secret is never used to verify (fresh attack pass 25 F04):
// HMAC accepts an empty key, so a receiver passing the variable of a
// finished rotation, now unset, beside its real secret accepted any body
// signed by anyone with the empty key. Each forgery below is signed with
// crypto/hmac directly, apart from the code under test.
func TestVerifyNeverUsesAnEmptySecret(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_780_000_000, 0)
	ts := "1780000000"
	body := []byte(`{"event":"forged"}`)
	forge := func(parts ...string) string {
		m := hmac.New(sha256.New, nil)
		for _, p := range parts {
			m.Write([]byte(p))
		}
		return hex.EncodeToString(m.Sum(nil))
	}
	v1 := forge(ts, ".", string(body))
	v2 := forge(ts, "\n", "key-1", "\n", "application/json", "\n", string(body))
	real := []byte("a-real-secret-of-thirty-two-bytes")
	verify := map[string]func(sig string, secrets ...[]byte) error{
		"v1": func(sig string, secrets ...[]byte) error { return Verify(ts, sig, body, now, secrets...) },
		"v2": func(sig string, secrets ...[]byte) error {
			return VerifyV2(ts, sig, "key-1", "application/json", body, now, secrets...)
		},
	}
	forged := map[string]string{"v1": v1, "v2": v2}
	for name, check := range verify {
		for _, tc := range []struct {
			what    string
			secrets [][]byte
			want    error
		}{
			{"an empty secret alone", [][]byte{{}}, ErrNoSecret},
			{"a nil secret alone", [][]byte{nil}, ErrNoSecret},
			{"empty and nil", [][]byte{nil, {}}, ErrNoSecret},
			{"no secret", nil, ErrNoSecret},
			{"a real secret and an empty one", [][]byte{real, {}}, ErrBadSignature},
			{"an empty secret first", [][]byte{nil, real}, ErrBadSignature},
		} {
			if err := check(forged[name], tc.secrets...); !errors.Is(err, tc.want) {
				t.Errorf("%s, %s: a body signed with the empty key: %v, want %v", name, tc.what, err, tc.want)
			}
		}
	}
	// The real secret still verifies beside an empty one.
	if err := Verify(ts, Sign(real, now, body), body, now, nil, real); err != nil {
		t.Errorf("v1 signed with the real secret, beside an empty one: %v", err)
	}
	if err := VerifyV2(ts, SignV2(real, now, "key-1", "application/json", body), "key-1", "application/json", body, now, real, []byte{}); err != nil {
		t.Errorf("v2 signed with the real secret, beside an empty one: %v", err)
	}
}
