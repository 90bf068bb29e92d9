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

// TestAClientPastItsShareIsTold429NotAnOutage (fresh attack pass A035):
// one unauthenticated address holding its share of the budget in stalled
// bodies got 503 SERVICE_UNAVAILABLE for every further request, and the
// 503 rate fired the broker-down alert. Past its own share a client gets
// 429 BODY_SHARE_EXHAUSTED (Retry-After, connection closed), counted as
// TOO_MANY_REQUESTS and never as a publish failure; another client's body
// still fits.
func TestAClientPastItsShareIsTold429NotAnOutage(t *testing.T) {
	const part = 4096
	cfg := defaultOptions()
	cfg.MaxBodyBytes = part // the share: max(largest body, a quarter)
	cfg.UnauthenticatedBodyBytes = 8 * part
	cfg.Sources = []Source{{Name: "x", Path: "/webhooks/x", Signature: &Signature{Scheme: "github", Tolerance: time.Minute, Secrets: []string{"s"}}}}
	i, err := New(cfg, &fakePublisher{}, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	i.SetClientIP(func(r *http.Request) string { return r.Header.Get("X-Test-Client") })
	srv := httptest.NewServer(i)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	head := func(client string, n int) string {
		return fmt.Sprintf("POST /webhooks/x HTTP/1.1\r\nHost: x\r\nX-Test-Client: %s\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: %d\r\n\r\n", client, n)
	}
	// The attacker holds its share (2 × part) in two stalled bodies.
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, head("attacker", part)+strings.Repeat("a", part-1))
	}
	deadline := time.Now().Add(5 * time.Second)
	for i.budget.used.Load() < 2*(part-1) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := i.budget.used.Load(); got != 2*(part-1) {
		t.Fatalf("budget used %d, want %d", got, 2*(part-1))
	}
	ask := func(client string) (*http.Response, string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		go fmt.Fprint(c, head(client, 64)+strings.Repeat("b", 64))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", client, err)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for range 3 {
		resp, body := ask("attacker")
		if resp.StatusCode != 429 || !resp.Close || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, ReasonBodyShare) {
			t.Fatalf("the attacker past its share: %d close=%v Retry-After=%q %s", resp.StatusCode, resp.Close, resp.Header.Get("Retry-After"), body)
		}
	}
	if resp, body := ask("provider"); resp.StatusCode == 429 || resp.StatusCode == 503 {
		t.Fatalf("another client refused while the budget has room: %d %s", resp.StatusCode, body)
	}
	if got := value(t, i.metrics.requests.WithLabelValues(StatusTooManyRequests)); got != 3 {
		t.Errorf("TOO_MANY_REQUESTS counted %v, want 3", got)
	}
	if got := value(t, i.metrics.requests.WithLabelValues(StatusServiceUnavailable)); got != 0 {
		t.Errorf("SERVICE_UNAVAILABLE counted %v, want 0 (the alert's numerator)", got)
	}
}

// One address with a few slow bodies spent the whole budget, and every
// signed source's deliveries got 503 (fresh attack pass B11): a client
// holds at most a quarter of it, so another client's body still fits.
func TestOneClientHoldsAtMostItsShareOfTheBudget(t *testing.T) {
	b := &bodyBudget{limit: 4000}
	if b.charge(b.reader(nil, "greedy"), 1000) != nil || b.charge(b.reader(nil, "greedy"), 1) != errBodyShare {
		t.Fatal("a client may hold exactly a quarter of the budget, and past it is told it holds its share")
	}
	for _, c := range []string{"a", "b", "c"} {
		if err := b.charge(b.reader(nil, c), 1000); err != nil {
			t.Fatalf("client %s refused while the budget has room: %v", c, err)
		}
	}
	if b.charge(b.reader(nil, "d"), 1) != errBodyBudget {
		t.Fatal("the whole budget is spent, yet a byte was charged (or the refusal blamed the client)")
	}
	r := &budgetReader{b: b, client: "greedy", held: 1000}
	r.release()
	if b.charge(b.reader(nil, "d"), 1000) != nil || b.used.Load() != 4000 {
		t.Fatalf("release did not give the bytes back: used %d", b.used.Load())
	}
	if _, left := b.byClient["greedy"]; left {
		t.Error("a client that holds nothing keeps an entry")
	}
	// One body of the largest accepted size always fits one client.
	big := &bodyBudget{limit: 4000, share: 3000}
	if big.charge(big.reader(nil, "one"), 3000) != nil || big.charge(big.reader(nil, "one"), 1) == nil {
		t.Error("the share is not the largest body when that exceeds a quarter")
	}
}

// Fresh attack pass 15 W20: stalled bodies from four addresses (a quarter
// of the budget each) held the whole budget for body_timeout, and every
// signature-only source answered 503: GitHub does not redeliver. Under
// pressure the budget now takes back the bytes of bodies that have been
// arriving for at least reclaimAfter, the slowest first (bytes per second
// of age), never a younger body's, the asker's or a body already read, and
// wakes the reclaimed reader (its abort) so its request ends.
func TestStalledBodiesGiveWayToANewerOne(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	b := &bodyBudget{limit: 4000, now: func() time.Time { return at }}
	aborted := map[string]bool{}
	holder := func(client string, n int64) *budgetReader {
		r := b.reader(strings.NewReader("more bytes"), client)
		r.abort = func() { aborted[client] = true }
		if err := b.charge(r, n); err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		return r
	}
	slow := holder("slow", 500) // the slowest: 500 bytes in its age
	a := holder("a", 1000)
	at = at.Add(time.Millisecond) // c is younger: slower by bytes per second of age, a goes first
	c := holder("c", 1000)
	done := holder("done", 1000)
	done.settle() // read whole: being verified and published
	if err := b.charge(b.reader(nil, "young"), 600); err != errBodyBudget {
		t.Fatalf("past the budget with every holder younger than %v: %v, want errBodyBudget", reclaimAfter, err)
	}
	at = at.Add(reclaimAfter - 2*time.Millisecond)
	if err := b.charge(b.reader(nil, "young"), 600); err != errBodyBudget {
		t.Fatalf("past the budget with every holder younger than %v by 1 ms: %v, want errBodyBudget", reclaimAfter, err)
	}
	at = at.Add(time.Millisecond)
	fresh := b.reader(nil, "provider")
	if err := b.charge(fresh, 600); err != nil {
		t.Fatalf("a newer body past the budget while bodies %v old hold it: %v, want room taken back", reclaimAfter, err)
	}
	if !slow.reclaimed.Load() || !aborted["slow"] || a.reclaimed.Load() || c.reclaimed.Load() {
		t.Fatalf("reclaimed slow=%v (aborted %v) a=%v c=%v: want only the slowest", slow.reclaimed.Load(), aborted["slow"], a.reclaimed.Load(), c.reclaimed.Load())
	}
	if got := b.used.Load(); got != 3600 {
		t.Errorf("used %d after taking back 500 for 600, want 3600", got)
	}
	if _, err := slow.Read(make([]byte, 1)); err != errBodyReclaimed {
		t.Errorf("the reclaimed reader's next read: %v, want errBodyReclaimed", err)
	}
	slow.release() // its bytes were returned already
	if got := b.used.Load(); got != 3600 {
		t.Errorf("used %d after the reclaimed reader's release, want 3600 (not returned twice)", got)
	}
	// More pressure: a, then c (equally slow: the older first), each for
	// one newer body; the body already read, the younger ones and the
	// asker never.
	at = at.Add(time.Millisecond) // c is old enough too
	for i, next := range []*budgetReader{a, c} {
		if err := b.charge(b.reader(nil, fmt.Sprint("p", i)), 1000); err != nil {
			t.Fatalf("newer body %d: %v", i, err)
		}
		if !next.reclaimed.Load() {
			t.Errorf("newer body %d: the next slowest not reclaimed", i)
		}
	}
	if done.reclaimed.Load() || fresh.reclaimed.Load() {
		t.Errorf("reclaimed done=%v fresh=%v: a body read whole and a young one must stay", done.reclaimed.Load(), fresh.reclaimed.Load())
	}
	if err := b.charge(b.reader(nil, "p3"), 1000); err != errBodyBudget {
		t.Errorf("nothing old left to take back: %v, want errBodyBudget", err)
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
	if r.reserve(1<<30) != nil {
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
