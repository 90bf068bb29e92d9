package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/olp-edu/borda/internal/servicetest"
)

// TestUpstashLocalAnswersTheRESTProtocol: the command serves the Upstash
// REST protocol over the real Redis (PING → PONG with the token, 401
// without), and refuses a listen address that is not loopback.
func TestUpstashLocalAnswersTheRESTProtocol(t *testing.T) {
	redisURL := servicetest.RedisURL(t)
	if code := run(t.Context(), []string{"-listen", "0.0.0.0:0", "-token", "t"}, io.Discard, io.Discard, nil); code != 2 {
		t.Errorf("a non-loopback -listen: exit %d, want 2", code)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-redis", redisURL, "-token", "local-rest-token"}, io.Discard, io.Discard, ready)
	}()
	addr := <-ready
	post := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(`["PING"]`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("local-rest-token"); code != 200 || !strings.Contains(body, `"PONG"`) {
		t.Errorf("PING = %d %s", code, body)
	}
	if code, _ := post(""); code != 401 {
		t.Errorf("PING without the token = %d, want 401", code)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after the context ended", code)
	}
}
