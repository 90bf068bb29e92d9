package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Encode must produce exactly what json.Marshal does (consumers and the
// DLQ tools may compare bytes), only cheaper.
func TestEncodeMatchesJSONMarshal(t *testing.T) {
	at := time.Date(2026, 1, 1, 6, 50, 0, 412e6, time.UTC)
	cases := []Envelope{
		New("id-1", "whatsapp", "application/json", map[string]string{"user-agent": "axios/1.7", "content-type": "application/json"}, []byte(`{"a": 1.0, "t": "Gold 🥇"}`), at),
		New("<&>\"id\"", "zapster", "application/x-www-form-urlencoded", nil, []byte("payload=%7B%7D"), at),
		New("empty", "s", "", map[string]string{}, []byte{}, at),
		{ID: "nil-body", ReceivedAt: at},
	}
	red := New("r", "evolution", "application/json", nil, []byte(`{"x":1}`), at)
	red.Event, red.Redacted, red.OriginalSHA256 = "messages-upsert", []string{"apikey"}, Digest([]byte(`{"x":1,"apikey":"k"}`))
	cases = append(cases, red)
	sent := New("s", "zapster", "application/json", nil, []byte(`{}`), at)
	sent.Sender = "whatsapp"
	cases = append(cases, sent)
	for _, e := range cases {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Encode =\n%s\nwant\n%s", got, want)
		}
	}
}

func TestDecodeRoundTripAndDigest(t *testing.T) {
	body := []byte(strings.Repeat("é", 1000))
	e := New("id", "whatsapp", "application/json", nil, body, time.Now())
	b, _ := e.Encode()
	got, err := Decode(b)
	if err != nil || !bytes.Equal(got.Body, body) || got.ID != "id" {
		t.Fatalf("Decode = %+v, %v", got.ID, err)
	}
	e.SHA256 = Digest([]byte("other"))
	b, _ = e.Encode()
	if _, err := Decode(b); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Decode with a wrong digest = %v", err)
	}
	if _, err := Decode([]byte(`{"id":`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Decode of bad JSON = %v", err)
	}
}

func BenchmarkEncode10MB(b *testing.B) {
	e := New("id", "whatsapp", "application/json", nil, bytes.Repeat([]byte("x"), 10<<20), time.Now())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzEncodeMatchesJSONMarshal holds the hand-written encoder to
// json.Marshal's bytes for any strings, headers and body.
func FuzzEncodeMatchesJSONMarshal(f *testing.F) {
	f.Add("id-1", "whatsapp", "application/json", "user-agent", "axios/1.7", []byte(`{"a":1}`), "messages-upsert", "apikey", int64(1767250200412000000))
	f.Add("<&>\"id\"\u2028", "s\x00", "text/plain; charset=\xff", "x-a", "\t", []byte{}, "", "", int64(-1))
	f.Fuzz(func(t *testing.T, id, source, contentType, hk, hv string, body []byte, event, redacted string, at int64) {
		e := New(id, source, contentType, map[string]string{hk: hv, "content-type": contentType}, body, time.Unix(0, at))
		e.Event = event
		e.Sender = hk // any string, empty included
		if redacted != "" {
			e.Redacted, e.OriginalSHA256 = []string{redacted, "apikey"}, Digest([]byte(redacted))
		}
		want, wantErr := json.Marshal(e)
		got, err := e.Encode()
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Encode error %v, json.Marshal error %v", err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Encode =\n%q\nwant\n%q", got, want)
		}
	})
}

func BenchmarkEncode1KB(b *testing.B) {
	e := New("escola-1:messages.upsert:3EB0C767D26A1D8E0A5C", "whatsapp", "application/json",
		map[string]string{"user-agent": "axios/1.7.2", "content-type": "application/json"}, bytes.Repeat([]byte("x"), 1024), time.Now())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDigestKnownVector pins the envelope's sha256 (and the body's
// base64) to values computed outside the code: consumers in other
// languages check them.
func TestDigestKnownVector(t *testing.T) {
	body := []byte(`{"a": 1.0, "t": "Gold 🥇"}`)
	// printf '%s' '{"a": 1.0, "t": "Gold 🥇"}' | sha256sum
	const want = "fd3c0291451e6b20dd282d35c676be7d5bbb38b897efb5531e18159694c36d15"
	if got := Digest(body); got != want {
		t.Errorf("Digest = %s, want %s", got, want)
	}
	// printf '' | sha256sum
	if got := Digest(nil); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("Digest(empty) = %s", got)
	}
	e := New("id", "s", "application/json", nil, body, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// printf '%s' '{"a": 1.0, "t": "Gold 🥇"}' | base64 -w0
	for _, s := range []string{`"sha256":"` + want + `"`, `"body_b64":"eyJhIjogMS4wLCAidCI6ICJHb2xkIPCfpYcifQ=="`} {
		if !bytes.Contains(b, []byte(s)) {
			t.Errorf("encoded envelope %s lacks %s", b, s)
		}
	}
}
