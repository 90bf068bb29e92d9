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
