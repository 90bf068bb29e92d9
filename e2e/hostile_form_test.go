package e2e

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/internal/servicetest"
)

// Fresh attack pass 7 W03: a form body with the payload field twice
// (the victim instance's "close" first, a legit "open" second) was 200
// PUBLISHED_CONFIRMED; borda consume-events wrote the first, a PHP legacy
// endpoint reads the last. The real binary refuses it, and every other
// spelling some form parser reads as a second payload, with 400
// AMBIGUOUS_FORM; a form with one payload is still published.
func TestHostileFormPayloadTwiceIsRefused(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	p := startIngressServe(t, newNames(t), amqpURL, redisURL)
	stamp := time.Now().UnixNano()
	event := func(instance, state string) string {
		return url.QueryEscape(fmt.Sprintf(`{"event":"connection.update","instance":"%s-%d","data":{"state":%q}}`, instance, stamp, state))
	}
	post := func(body string) (int, string) {
		raw := fmt.Sprintf("POST /webhooks/whatsapp HTTP/1.1\r\nHost: gw.localhost\r\nAuthorization: Bearer %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", ingressToken, len(body), body)
		resp, reply, err := rawExchange(t, p.public, raw, 10*time.Second)
		if err != nil {
			t.Fatalf("POST %q: %v", body, err)
		}
		return resp.StatusCode, reply
	}
	for _, second := range []string{"payload", "Payload", "payload%5Bx%5D", "%5Bpayload%5D", "payload%00x", "+payload"} {
		body := "payload=" + event("victim", "close") + "&" + second + "=" + event("legit", "open")
		if code, reply := post(body); code != 400 || !strings.Contains(reply, "AMBIGUOUS_FORM") {
			t.Errorf("payload then %s: %d %s, want 400 AMBIGUOUS_FORM", second, code, reply)
		}
	}
	// Fresh attack pass 8 W01: the payload's own JSON gets a JSON body's
	// checks (a repeated member was 200; consume-events wrote the last).
	dup := url.QueryEscape(fmt.Sprintf(`{"event":"connection.update","instance":"legit-%d","instance":"victim-%d","data":{"state":"close"}}`, stamp, stamp))
	if code, reply := post("payload=" + dup); code != 400 || !strings.Contains(reply, "DUPLICATE_MEMBER") {
		t.Errorf("payload with a repeated member: %d %s, want 400 DUPLICATE_MEMBER", code, reply)
	}
	if code, reply := post("payload=" + event("one", "open")); code != 200 || !strings.Contains(reply, "PUBLISHED_CONFIRMED") {
		t.Errorf("one payload: %d %s, want 200 PUBLISHED_CONFIRMED", code, reply)
	}
}

// Fresh attack pass 7 W16: a UTF-8 JSON body labelled charset=latin1 (or
// utf-16) was 200 and the label forwarded to the legacy endpoint, whose
// charset-honouring readers read other text. The real binary refuses it
// 400 INVALID_UTF8; the same body labelled UTF-8 is published.
func TestHostileWebhookLabelledLatin1IsRefused(t *testing.T) {
	amqpURL, redisURL := servicetest.AMQPURL(t), servicetest.RedisURL(t)
	p := startIngressServe(t, newNames(t), amqpURL, redisURL)
	body := fmt.Sprintf(`{"id":"latin1-%d","text":"olá"}`, time.Now().UnixNano())
	post := func(ct string) (int, string) {
		raw := fmt.Sprintf("POST /webhooks/whatsapp HTTP/1.1\r\nHost: gw.localhost\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", ingressToken, ct, len(body), body)
		resp, reply, err := rawExchange(t, p.public, raw, 10*time.Second)
		if err != nil {
			t.Fatalf("POST %s: %v", ct, err)
		}
		return resp.StatusCode, reply
	}
	for _, ct := range []string{"application/json; charset=latin1", "application/json; charset=utf-16"} {
		if code, reply := post(ct); code != 400 || !strings.Contains(reply, "INVALID_UTF8") {
			t.Errorf("%s: %d %s, want 400 INVALID_UTF8", ct, code, reply)
		}
	}
	if code, reply := post("application/json; charset=utf-8"); code != 200 || !strings.Contains(reply, "PUBLISHED_CONFIRMED") {
		t.Errorf("charset=utf-8: %d %s, want 200", code, reply)
	}
}
