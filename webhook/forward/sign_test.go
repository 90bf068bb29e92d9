package forward

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	now := time.Unix(1767225600, 0)
	body := []byte(`{"a": 1.0, "t": "Gold 🥇"}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := Sign(secret, now, body)
	tests := []struct {
		name    string
		ts, sig string
		body    []byte
		now     time.Time
		secrets [][]byte
		want    error
	}{
		{"valid", ts, sig, body, now, [][]byte{secret}, nil},
		{"valid during rotation", ts, sig, body, now, [][]byte{[]byte("new"), secret}, nil},
		{"4m59s old", ts, sig, body, now.Add(299 * time.Second), [][]byte{secret}, nil},
		{"older than 5 minutes", ts, sig, body, now.Add(301 * time.Second), [][]byte{secret}, ErrStaleTimestamp},
		{"from the future", ts, sig, body, now.Add(-301 * time.Second), [][]byte{secret}, ErrStaleTimestamp},
		{"body changed", ts, sig, []byte(`{"a":1.0,"t":"Gold 🥇"}`), now, [][]byte{secret}, ErrBadSignature},
		{"wrong secret", ts, sig, body, now, [][]byte{[]byte("other")}, ErrBadSignature},
		{"upper-case hex is not ours", ts, "ZZ" + sig[2:], body, now, [][]byte{secret}, ErrBadSignature},
		{"timestamp not a number", "2026-01-01", sig, body, now, [][]byte{secret}, ErrBadTimestamp},
		{"missing signature", ts, "", body, now, [][]byte{secret}, ErrMissingSignature},
		{"no secret", ts, sig, body, now, nil, ErrMissingSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := Verify(tt.ts, tt.sig, tt.body, tt.now, tt.secrets...); !errors.Is(err, tt.want) {
				t.Errorf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSign_KnownVector(t *testing.T) {
	t.Parallel()
	// printf '1767225600.{"a":1}' | openssl dgst -sha256 -hmac s3cret
	got := Sign([]byte("s3cret"), time.Unix(1767225600, 0), []byte(`{"a":1}`))
	if len(got) != 64 {
		t.Fatalf("signature %q: want 64 lower-case hex digits", got)
	}
	if got != Sign([]byte("s3cret"), time.Unix(1767225600, 999), []byte(`{"a":1}`)) {
		t.Error("the signature must depend on whole seconds only")
	}
}

func FuzzVerify(f *testing.F) {
	f.Add("1767225600", "00", []byte("{}"))
	f.Add("-1", "zz", []byte(""))
	f.Add("99999999999999999999", "", []byte("x"))
	now := time.Unix(1767225600, 0)
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		if err := Verify(ts, sig, body, now, []byte("k")); err == nil {
			if sig != Sign([]byte("k"), mustUnix(ts), body) {
				t.Fatalf("accepted a signature that is not ours: ts %q sig %q", ts, sig)
			}
		}
	})
}

func mustUnix(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(n, 0)
}
