package ingress

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// payloadDir holds the providers' payloads as wire-exact bytes;
// the signature tests read them as the providers send them.
const payloadDir = "../testdata/payloads"

// payload reads a provider payload and its .headers file (if any).
func payload(t testing.TB, name string) ([]byte, http.Header) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(payloadDir, name))
	if err != nil {
		t.Fatalf("payload %s: %v (the fixtures live in webhook/testdata/payloads; a missing one fails, never skips)", name, err)
	}
	h := http.Header{}
	f, err := os.Open(filepath.Join(payloadDir, strings.TrimSuffix(name, ".json")+".headers"))
	if err != nil {
		return body, h
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "POST ") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && k != "Content-Length" {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return body, h
}

const standardSecret = "whsec_dGVzdC1zZWNyZXQtc3RhbmRhcmQtd2ViaG9va3MtMDAwMQ=="

func TestGitHubSignatureOverRawBytes(t *testing.T) {
	body, h := payload(t, "github-ping.json")
	v, err := newVerifier("github", []string{"old-secret", "test-secret"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !v.present(h) {
		t.Fatal("present = false with X-Hub-Signature-256")
	}
	if err := v.verify(h, body, time.Now()); err != nil {
		t.Fatalf("verify(github-ping.json) = %v", err)
	}
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-2] ^= 1
	if err := v.verify(h, tampered, time.Now()); err == nil {
		t.Fatal("verify(tampered) = nil")
	}
	h.Set("X-Hub-Signature-256", "sha256=zz")
	if err := v.verify(h, body, time.Now()); err == nil {
		t.Fatal("verify(bad hex) = nil")
	}
}

func TestStandardWebhooksSignatureWithFrozenClock(t *testing.T) {
	body, h := payload(t, "standard-webhooks-example.json")
	v, err := newVerifier("standard", []string{standardSecret}, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1767225600, 0)
	if err := v.verify(h, body, at.Add(4*time.Minute)); err != nil {
		t.Fatalf("verify = %v", err)
	}
	if err := v.verify(h, body, at.Add(6*time.Minute)); err == nil {
		t.Fatal("verify 6 min later = nil, want outside tolerance")
	}
	// Rotation: several signatures, one valid.
	h.Set("Webhook-Signature", "v1,AAAA "+h.Get("Webhook-Signature"))
	if err := v.verify(h, body, at); err != nil {
		t.Fatalf("verify with a stale signature first = %v", err)
	}
	h.Set("Webhook-Id", "msg_other")
	if err := v.verify(h, body, at); err == nil {
		t.Fatal("verify with another webhook-id = nil")
	}
}

func TestStripeSignature(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"charge.succeeded"}`)
	at := time.Unix(1767225600, 0)
	sign := func(secret string) string {
		m := hmac.New(sha256.New, []byte(secret))
		fmt.Fprintf(m, "%d.%s", at.Unix(), body)
		return hex.EncodeToString(m.Sum(nil))
	}
	v, err := newVerifier("stripe", []string{"whsec_old", "whsec_new"}, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Stripe-Signature", fmt.Sprintf("t=%d,v1=%s,v0=ignored", at.Unix(), sign("whsec_new")))
	if err := v.verify(h, body, at.Add(time.Minute)); err != nil {
		t.Fatalf("verify = %v", err)
	}
	if err := v.verify(h, body, at.Add(10*time.Minute)); err == nil {
		t.Fatal("verify outside tolerance = nil")
	}
	h.Set("Stripe-Signature", fmt.Sprintf("t=%d,v1=%s", at.Unix(), sign("whsec_other")))
	if err := v.verify(h, body, at); err == nil {
		t.Fatal("verify with an unknown secret = nil")
	}
}

func TestNewVerifierRefusesMissingSecrets(t *testing.T) {
	if _, err := newVerifier("github", nil, 0); err == nil {
		t.Fatal("newVerifier without secrets = nil error")
	}
	if _, err := newVerifier("standard", []string{"whsec_***"}, 0); err == nil {
		t.Fatal("newVerifier with a bad whsec_ key = nil error")
	}
}

func hexHMAC(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

// A secret anyone can sign with is refused, in every spelling: "whsec_"
// alone (a template whose variable was unset), an empty entry of a
// rotation list, blank text for the other schemes. An HMAC over an empty
// key was accepted as a valid Standard Webhooks signature.
func TestSigningSecretsAnyoneCanSignWithAreRefused(t *testing.T) {
	for _, tc := range []struct {
		scheme  string
		secrets []string
	}{
		{"standard", []string{"whsec_"}},
		{"standard", []string{" whsec_ "}},
		{"standard", []string{""}},
		{"standard", []string{"whsec_c2VjcmV0c2VjcmV0c2VjcmV0", "whsec_"}},
		{"standard", []string{"plainsecret"}},
		{"github", []string{" "}},
		{"github", []string{"good-secret", ""}},
		{"stripe", []string{"\t"}},
	} {
		if _, err := newVerifier(tc.scheme, tc.secrets, time.Minute); err == nil {
			t.Errorf("newVerifier(%s, %q) accepted a secret anyone can sign with", tc.scheme, tc.secrets)
		}
	}
	if _, err := newVerifier("standard", []string{"whsec_c2VjcmV0c2VjcmV0c2VjcmV0"}, time.Minute); err != nil {
		t.Errorf("a good whsec_ secret: %v", err)
	}
}

// TestSignatureTimestampToleranceIncludesItsEdges: a timestamp exactly
// the tolerance away, in the past or the future, is accepted; one second
// more is refused.
func TestSignatureTimestampToleranceIncludesItsEdges(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const tol = 5 * time.Minute
	for offset, ok := range map[int64]bool{-300: true, 300: true, 0: true, -301: false, 301: false} {
		ts := strconv.FormatInt(now.Unix()+offset, 10)
		if err := checkTimestamp(ts, now, tol); (err == nil) != ok {
			t.Errorf("timestamp now%+d s with a %s tolerance: %v, want accepted=%v", offset, tol, err, ok)
		}
	}
}
