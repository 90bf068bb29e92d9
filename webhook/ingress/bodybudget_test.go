package ingress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestUnauthenticatedBodiesShareOneBudget: on a signature-only source,
// unauthenticated clients made the ingress buffer every body whole before
// the check (40 connections x 10 MB: RSS 58 -> 458 MB). For several
// budgets, slow bodies that hold the budget make the next body's bytes
// answered 503 BODY_BUDGET_EXHAUSTED (connection closed, Retry-After)
// before it is buffered; once they end the budget is whole again.
func TestUnauthenticatedBodiesShareOneBudget(t *testing.T) {
	for _, holders := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(holders), func(t *testing.T) {
			const part = 4096 // each holder sends this much and stalls
			cfg := defaultOptions()
			cfg.MaxBodyBytes = 1 << 20
			cfg.UnauthenticatedBodyBytes = int64(holders*part + part/2)
			cfg.Sources = []Source{{Name: "x", Path: "/webhooks/x", Signature: &Signature{
				Scheme: "github", Tolerance: time.Minute, Secrets: []string{"s"}}}}
			i, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(i)
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			head := "POST /webhooks/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: 100000\r\n\r\n"
			var held []net.Conn
			for range holders {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				fmt.Fprint(c, head+strings.Repeat("a", part))
				held = append(held, c)
			}
			// Wait until the holders' bytes are charged (read by the server).
			deadline := time.Now().Add(5 * time.Second)
			for i.budget.used.Load() < int64(holders*part) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := i.budget.used.Load(); got != int64(holders*part) {
				t.Fatalf("budget used %d, want %d", got, holders*part)
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			go fmt.Fprint(c, head+strings.Repeat("b", part))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer past the budget: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 503 || !resp.Close || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), ReasonBodyBudget) {
				t.Fatalf("past the budget: %d close=%v Retry-After=%q %s", resp.StatusCode, resp.Close, resp.Header.Get("Retry-After"), body)
			}
			for _, h := range held {
				h.Close()
			}
			deadline = time.Now().Add(5 * time.Second)
			for i.budget.used.Load() != 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := i.budget.used.Load(); got != 0 {
				t.Fatalf("the budget was not released: %d bytes still charged", got)
			}
		})
	}
}
