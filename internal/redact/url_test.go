package redact

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestURLHidesEveryURLSecret covers each place a URL carries a
// secret: password, a lone user name (a token), query values, bare query
// parts, fragments, and malformed userinfo that net/url would refuse.
func TestURLHidesEveryURLSecret(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"amqp://guest:CANARY@rabbit:5672/vhost", "amqp://guest:xxxxx@rabbit:5672/vhost"},
		{"redis://:CANARY@redis:6379/0", "redis://:xxxxx@redis:6379/0"},
		{"https://CANARY@legacy.example.org/hook", "https://xxxxx@legacy.example.org/hook"},
		{"https://legacy.example.org/hook?token=CANARY&v=2", "https://legacy.example.org/hook?token=xxxxx&v=xxxxx"},
		{"https://legacy.example.org/hook?CANARY", "https://legacy.example.org/hook?xxxxx"},
		{"https://idp.example.org/jwks#CANARY", "https://idp.example.org/jwks#xxxxx"},
		{"https://u:CANARY@h/p?k=CANARY#CANARY", "https://u:xxxxx@h/p?k=xxxxx#xxxxx"},
		{"redis://u:CAN/ARY@redis:6379", "redis://xxxxx@redis:6379"},     // unescaped '/' in the password
		{"redis://u:CAN?ARY@redis:6379", "redis://xxxxx@redis:6379"},     // unescaped '?'
		{"redis://u:CAN#ARY@redis:6379", "redis://xxxxx@redis:6379"},     // unescaped '#'
		{"redis://u:CA@NARY@redis:6379", "redis://u:xxxxx@redis:6379"},   // unescaped '@'
		{"postgres://u:CAN%zzARY@db/test", "postgres://u:xxxxx@db/test"}, // bad escape: url.Parse fails
		{"https://u:CANARY", "https://u:xxxxx"},                          // cut short by a quote
		{"http://portal-app:3000/api", "http://portal-app:3000/api"},     // nothing secret
		{"http://[::1]:3000/", "http://[::1]:3000/"},                     // IPv6 literal kept
		{"no url here", "no url here"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestURLsFindsURLsInErrorText redacts URLs embedded in library
// error messages (net/http quotes them, AMQP and Redis do not).
func TestURLsFindsURLsInErrorText(t *testing.T) {
	for _, in := range []string{
		`Post "https://u:CANARY@127.0.0.1:1/hook?token=CANARY": dial tcp 127.0.0.1:1: connect: connection refused`,
		`dialing amqp://guest:CANARY@127.0.0.1:1/: connection refused`,
		`fetching 'https://idp/jwks?key=CANARY' failed`,
		`Post "https://u:CAN\"ARY@h/": bad`,
	} {
		if got := URLs(in); strings.Contains(got, "CANARY") || strings.Contains(got, "ARY@") {
			t.Errorf("URLs(%q) = %q: the secret is still there", in, got)
		}
	}
}

// TestErrorKeepsTheChain: a redacted *url.Error still answers
// errors.As and errors.Is, so timeout classification keeps working.
func TestErrorKeepsTheChain(t *testing.T) {
	_, err := http.Post("http://u:CANARY@127.0.0.1:1/?token=CANARY", "text/plain", nil)
	if err == nil {
		t.Skip("something listens on 127.0.0.1:1")
	}
	red := Error(err)
	if strings.Contains(red.Error(), "CANARY") {
		t.Fatalf("Error: %v", red)
	}
	var ue *url.Error
	if !errors.As(red, &ue) {
		t.Fatalf("Error dropped *url.Error from the chain: %T", red)
	}
	wrapped := Error(fmt.Errorf("x: %w", errSentinel))
	if !errors.Is(wrapped, errSentinel) {
		t.Fatal("Error dropped the sentinel")
	}
	if Error(nil) != nil {
		t.Fatal("Error(nil) != nil")
	}
}

var errSentinel = errors.New("sentinel")
