package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The reconciliation must fail on every way an acknowledged event can go
// wrong, and only on those.
func TestReconcileCountsEveryOutcome(t *testing.T) {
	a := func(source, id string) key { return key{source, id} }
	sentBy := map[key]sent{
		a("whatsapp", "r-1"): {attempts: 1, acked: true, status: "200 PUBLISHED_CONFIRMED"},
		a("zapster", "r-1"):  {attempts: 3, acked: true, status: "200 PUBLISHED_CONFIRMED"}, // same id, other source
		a("whatsapp", "r-2"): {attempts: 1, acked: true},
		a("whatsapp", "r-3"): {attempts: 1, acked: true},
		a("whatsapp", "r-4"): {attempts: 2, acked: true},
		a("whatsapp", "r-5"): {attempts: 1, acked: true},
		a("whatsapp", "r-6"): {attempts: 4}, // never a 200, delivered once: allowed
	}
	legacy := map[key]int{
		a("whatsapp", "r-1"): 1,
		a("zapster", "r-1"):  1,
		a("whatsapp", "r-3"): 2, // duplicated
		a("whatsapp", "r-5"): 1, // and dead-lettered too
		a("whatsapp", "r-6"): 1,
		a("whatsapp", "x-9"): 1, // never sent
	}
	dlq := map[key]int{
		a("whatsapp", "r-4"): 1,
		a("whatsapp", "r-5"): 1,
	}
	r := reconcile(sentBy, legacy, dlq)
	if r.ok() {
		t.Fatal("reconciliation passed with a loss, a duplicate and an unexpected delivery")
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ";") != strings.Join(want, ";") {
			t.Errorf("%s = %q, want %q", what, got, want)
		}
	}
	check("lost", r.lost, "whatsapp/r-2")
	check("duplicated", r.duplicated, "whatsapp/r-3 (legacy 2, dlq 0)")
	check("both", r.both, "whatsapp/r-5 (legacy 1, dlq 1)")
	check("unexpected", r.unexpected, "whatsapp/x-9")
	if r.delivered != 2 || r.deadLettered != 1 || r.acked != 6 || r.unacked != 1 || r.extraUnacked != 1 {
		t.Errorf("delivered %d, dead-lettered %d, acked %d, unacked %d, extra %d; want 2, 1, 6, 1, 1",
			r.delivered, r.deadLettered, r.acked, r.unacked, r.extraUnacked)
	}

	clean := reconcile(map[key]sent{a("whatsapp", "r-1"): {acked: true, attempts: 1}, a("zapster", "r-1"): {acked: true, attempts: 1}},
		map[key]int{a("whatsapp", "r-1"): 1}, map[key]int{a("zapster", "r-1"): 1})
	if !clean.ok() {
		t.Errorf("a clean run failed: %+v", clean)
	}
	if empty := reconcile(map[key]sent{}, nil, nil); empty.ok() {
		t.Error("a run that acknowledged nothing passed")
	}
}

// The legacy stand-in's check is pinned to HMACs computed outside Go:
//
//	printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac sekrit
//	printf '1700000000\nk-1\napplication/json\n{"a":1}' | openssl dgst -sha256 -hmac sekrit
func TestVerifyMatchesOpenSSLVectors(t *testing.T) {
	const v1 = "ff8c920725a395b303d30eb509b37bc42837a5bdbe05bd224a07d783f101ee46"
	const v2 = "57ee7806c4ae2c3f29da1530774cf32209f26c3db88189fc671983723f5ab20f"
	body := []byte(`{"a":1}`)
	now := time.Unix(1700000000, 0).Add(time.Minute)
	h := func(mut func(http.Header)) http.Header {
		hd := http.Header{}
		hd.Set("X-Webhook-Timestamp", "1700000000")
		hd.Set("X-Webhook-Signature", v1)
		hd.Set("X-Webhook-Signature-V2", v2)
		hd.Set("Idempotency-Key", "k-1")
		hd.Set("Content-Type", "application/json")
		if mut != nil {
			mut(hd)
		}
		return hd
	}
	if why := verify([]byte("sekrit"), h(nil), body, now); why != "" {
		t.Fatalf("the vectors do not verify: %s", why)
	}
	for name, c := range map[string]struct {
		h    http.Header
		body []byte
		now  time.Time
	}{
		"other body":      {h(nil), []byte(`{"a":2}`), now},
		"other key":       {h(func(hd http.Header) { hd.Set("Idempotency-Key", "k-2") }), body, now},
		"other type":      {h(func(hd http.Header) { hd.Set("Content-Type", "text/plain") }), body, now},
		"no v2":           {h(func(hd http.Header) { hd.Del("X-Webhook-Signature-V2") }), body, now},
		"stale":           {h(nil), body, now.Add(10 * time.Minute)},
		"other timestamp": {h(func(hd http.Header) { hd.Set("X-Webhook-Timestamp", "1700000001") }), body, now},
	} {
		if verify([]byte("sekrit"), c.h, c.body, c.now) == "" {
			t.Errorf("%s: verified", name)
		}
	}
}

// A POST with a bad signature, or one naming no event, fails the run
// however the ledger reconciles.
func TestLegacyCountsWhatShouldNotHaveReachedIt(t *testing.T) {
	l := newLegacy([]byte("sekrit"))
	if !l.clean() {
		t.Fatal("a fresh stand-in is not clean")
	}
	srv := httptest.NewServer(l)
	defer srv.Close()
	post := func(mut func(*http.Request)) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"data":{"key":{"id":"r-1"}}}`))
		req.Header.Set("X-Webhook-Timestamp", fmt.Sprint(time.Now().Unix()))
		req.Header.Set("X-Webhook-Signature", "00")
		if mut != nil {
			mut(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(nil); code != http.StatusUnauthorized {
		t.Errorf("bad signature answered %d, want 401", code)
	}
	if l.clean() || len(l.ledger()) != 0 {
		t.Errorf("after a bad signature: clean %t, ledger %v", l.clean(), l.ledger())
	}
}
