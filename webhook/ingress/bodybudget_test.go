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
	for _, holders := range []int{4, 5, 8} { // at least 4: one client holds at most a quarter
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
			// Each holder is a client of its own (one client may hold only
			// a quarter of the budget: TestOneClientHoldsAtMostItsShareOfTheBudget).
			i.SetClientIP(func(r *http.Request) string { return r.Header.Get("X-Test-Client") })
			srv := httptest.NewServer(i)
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			head := func(client string) string {
				return "POST /webhooks/x HTTP/1.1\r\nHost: x\r\nX-Test-Client: " + client + "\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: 100000\r\n\r\n"
			}
			var held []net.Conn
			for n := range holders {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				fmt.Fprint(c, head(fmt.Sprint("holder-", n))+strings.Repeat("a", part))
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
			go fmt.Fprint(c, head("late")+strings.Repeat("b", part))
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

// One address with a few slow bodies spent the whole budget, and every
// signed source's deliveries got 503 (fresh attack pass B11): a client
// holds at most a quarter of it, so another client's body still fits.
func TestOneClientHoldsAtMostItsShareOfTheBudget(t *testing.T) {
	b := &bodyBudget{limit: 4000}
	if !b.charge("greedy", 1000) || b.charge("greedy", 1) {
		t.Fatal("a client may hold exactly a quarter of the budget")
	}
	for _, c := range []string{"a", "b", "c"} {
		if !b.charge(c, 1000) {
			t.Fatalf("client %s refused while the budget has room", c)
		}
	}
	if b.charge("d", 1) {
		t.Fatal("the whole budget is spent, yet a byte was charged")
	}
	r := &budgetReader{b: b, client: "greedy", held: 1000}
	r.release()
	if !b.charge("d", 1000) || b.used.Load() != 4000 {
		t.Fatalf("release did not give the bytes back: used %d", b.used.Load())
	}
	if _, left := b.byClient["greedy"]; left {
		t.Error("a client that holds nothing keeps an entry")
	}
	// One body of the largest accepted size always fits one client.
	big := &bodyBudget{limit: 4000, share: 3000}
	if !big.charge("one", 3000) || big.charge("one", 1) {
		t.Error("the share is not the largest body when that exceeds a quarter")
	}
}

// TestZeroBudgetRefusesNothing: Options.UnauthenticatedBodyBytes 0 is no
// budget (its default is the configuration's,
// webhook.unauthenticated_body_bytes): charges are counted and given
// back, never refused.
func TestZeroBudgetRefusesNothing(t *testing.T) {
	t.Parallel()
	b := &bodyBudget{}
	r := b.reader(strings.NewReader(strings.Repeat("a", 1<<20)), "c")
	if !r.reserve(1 << 30) {
		t.Fatal("reserve refused with no budget")
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	r.release()
	if got := b.used.Load(); got != 0 {
		t.Errorf("used after release = %d, want 0", got)
	}
}
