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
		{"exactly 5 minutes old", ts, sig, body, now.Add(MaxSignatureAge), [][]byte{secret}, nil},
		{"exactly 5 minutes ahead", ts, sig, body, now.Add(-MaxSignatureAge), [][]byte{secret}, nil},
		{"older than 5 minutes", ts, sig, body, now.Add(301 * time.Second), [][]byte{secret}, ErrStaleTimestamp},
		{"from the future", ts, sig, body, now.Add(-301 * time.Second), [][]byte{secret}, ErrStaleTimestamp},
		{"body changed", ts, sig, []byte(`{"a":1.0,"t":"Gold 🥇"}`), now, [][]byte{secret}, ErrBadSignature},
		{"wrong secret", ts, sig, body, now, [][]byte{[]byte("other")}, ErrBadSignature},
		{"upper-case hex is not ours", ts, "ZZ" + sig[2:], body, now, [][]byte{secret}, ErrBadSignature},
		{"timestamp not a number", "2026-01-01", sig, body, now, [][]byte{secret}, ErrBadTimestamp},
		{"missing signature", ts, "", body, now, [][]byte{secret}, ErrMissingSignature},
		{"no secret", ts, sig, body, now, nil, ErrNoSecret},
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

// TestSign_KnownVector pins version 1 to vectors computed outside the
// code; a change of the separator, the timestamp's format or the hex case
// fails it.
func TestSign_KnownVector(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		body, want string
	}{
		// printf '%s' '1767225600.{"a":1}' | openssl dgst -sha256 -hmac s3cret
		{`{"a":1}`, "7d4120fcebf444efab10ba7cd6c651bf463cefb039db5fad37ff9f7231ac8a4a"},
		// printf '%s' '1767225600.{"a": 1.0, "t": "Gold 🥇"}' | openssl dgst -sha256 -hmac s3cret
		{`{"a": 1.0, "t": "Gold 🥇"}`, "60052da293ed090da59ffe237857bcafdfa2ce2a4e6ca28fa86749e34ada7cc9"},
	} {
		if got := Sign([]byte("s3cret"), time.Unix(1767225600, 999), []byte(v.body)); got != v.want {
			t.Errorf("Sign(%s) = %s, want %s", v.body, got, v.want)
		}
		if err := Verify("1767225600", v.want, []byte(v.body), time.Unix(1767225600, 0), []byte("s3cret")); err != nil {
			t.Errorf("Verify(published vector %s) = %v", v.want, err)
		}
	}
}

// TestSignV2_KnownVector pins version 2 (timestamp, Idempotency-Key,
// Content-Type and body, "\n"-separated) to vectors computed outside the
// code, and shows that each covered header changes it.
func TestSignV2_KnownVector(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		key, ct, body, want string
	}{
		// printf '1767225600\nevt-42\napplication/json\n{"a":1}' | openssl dgst -sha256 -hmac s3cret
		{"evt-42", "application/json", `{"a":1}`, "2feb61e1c55858745a6693feed59ea7cc99bbb0995e5a00a547dc8019057c393"},
		// printf '1767225600\nevt-42\napplication/x-www-form-urlencoded\n{"a":1}' | openssl dgst -sha256 -hmac s3cret
		{"evt-42", "application/x-www-form-urlencoded", `{"a":1}`, "aa816708e5b01508bb9e1f1e64ca103b6ea6b9edf7919d203b3dcbdc1ab1df27"},
		// printf '1767225600\n\n\n' | openssl dgst -sha256 -hmac s3cret
		{"", "", "", "4e69067a33744e3d7d9b3bbc03f50caac09a32aae9c6ed7028fb4918e074ee4f"},
	} {
		if got := SignV2([]byte("s3cret"), time.Unix(1767225600, 0), v.key, v.ct, []byte(v.body)); got != v.want {
			t.Errorf("SignV2(%q, %q, %s) = %s, want %s", v.key, v.ct, v.body, got, v.want)
		}
		now := time.Unix(1767225600, 0)
		if err := VerifyV2("1767225600", v.want, v.key, v.ct, []byte(v.body), now, []byte("s3cret")); err != nil {
			t.Errorf("VerifyV2(published vector %s) = %v", v.want, err)
		}
		if err := VerifyV2("1767225600", v.want, v.key+"x", v.ct, []byte(v.body), now, []byte("s3cret")); !errors.Is(err, ErrBadSignature) {
			t.Errorf("VerifyV2 with a changed Idempotency-Key = %v, want ErrBadSignature", err)
		}
		if err := VerifyV2("1767225600", v.want, v.key, v.ct+"x", []byte(v.body), now, []byte("s3cret")); !errors.Is(err, ErrBadSignature) {
			t.Errorf("VerifyV2 with a changed Content-Type = %v, want ErrBadSignature", err)
		}
		// The shift attack: moving bytes between fields.
		if err := VerifyV2("1767225600", v.want, "", v.key+"\n"+v.ct, []byte(v.body), now, []byte("s3cret")); err == nil && v.key != "" {
			t.Errorf("VerifyV2 accepted the key shifted into Content-Type")
		}
	}
	if err := VerifyV2("1767225600", "00", "k", "c", nil, time.Unix(1767225600+301, 0), []byte("s3cret")); !errors.Is(err, ErrStaleTimestamp) {
		t.Errorf("VerifyV2 301 s late = %v, want ErrStaleTimestamp", err)
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

func FuzzVerifyV2(f *testing.F) {
	f.Add("1767225600", "00", "evt", "application/json", []byte("{}"))
	f.Add("1767225600", "", "", "", []byte(""))
	now := time.Unix(1767225600, 0)
	f.Fuzz(func(t *testing.T, ts, sig, key, ct string, body []byte) {
		if err := VerifyV2(ts, sig, key, ct, body, now, []byte("k")); err == nil {
			if sig != SignV2([]byte("k"), mustUnix(ts), key, ct, body) {
				t.Fatalf("accepted a signature that is not ours: ts %q sig %q", ts, sig)
			}
		}
	})
}
