package main

import (
	"bytes"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/olp-edu/borda/configs"
)

// TestProcessLogRedactsURLSecrets: whatever a library puts in its error
// (net/http's *url.Error, a dial error naming an AMQP URL) or a caller
// logs (a URL string, a *url.URL, a configs.Secret), the process log
// carries no URL password or query value.
func TestProcessLogRedactsURLSecrets(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf)
	u, _ := url.Parse("https://u:CANARY1@legacy/hook?token=CANARY2")
	log.Warn("posting to https://u:CANARY3@legacy/hook failed",
		"err", &url.Error{Op: "Post", URL: "https://u:CANARY4@legacy/hook?token=CANARY5", Err: errors.New("refused")},
		"url", "amqp://guest:CANARY6@rabbit:5672/",
		"parsed", u,
		"secret", configs.Secret("CANARY7"),
	)
	log.With("jwks", "https://idp/jwks?key=CANARY8").Info("with")
	if out := buf.String(); strings.Contains(out, "CANARY") || !strings.Contains(out, "legacy/hook") {
		t.Fatalf("log lines leak a secret or lost the host:\n%s", out)
	}
}
