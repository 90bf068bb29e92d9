package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/publish"
)

// The ingress reuses each event's body and envelope buffers (scratch.go)
// once the publisher has returned. A buffer given back too early, or
// shared by two requests, would publish one event's bytes under another's
// id. 400 concurrent events of sizes on both sides of the pooled buffers'
// size (scratchKeep), some without a Content-Length (chunked), must each
// land in the queue with exactly their own bytes.
func TestPooledBuffersNeverMixTwoEvents(t *testing.T) {
	t.Parallel()
	s := newStack(t, testConfig(t))
	const n = 400
	sizes := []int{10, 900, 3000, scratchKeep - 200, scratchKeep + 5000}
	bodies := make([][]byte, n)
	for k := range n {
		pad := strings.Repeat(string(rune('a'+k%26)), sizes[k%len(sizes)])
		bodies[k] = fmt.Appendf(nil, `{"event":"messages.upsert","instance":"pool","data":{"key":{"id":"pool-%d"},"message":{"conversation":%q}}}`, k, pad)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 48)
	for k := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			body := bodies[k]
			code, a, _ := s.postMaybeChunked(t, body, k%3 == 0)
			if code != 200 || a.Status != StatusPublishedConfirmed {
				t.Errorf("event %d: %d %s, want 200 PUBLISHED_CONFIRMED", k, code, a.Status)
			}
		}()
	}
	wg.Wait()
	got := s.envelopes(t)
	if len(got) != n {
		t.Fatalf("queue holds %d events, want %d", len(got), n)
	}
	for k, body := range bodies {
		id := bindBody(fmt.Sprintf("pool:messages.upsert:pool-%d", k), body) // webhook.id_fields: instance, event, data.key.id, bound to the body (a token source)
		env, ok := got[id]
		if !ok {
			t.Errorf("event %s not in the queue", id)
			continue
		}
		if !bytes.Equal(env.Body, body) || env.SHA256 != envelope.Digest(body) {
			t.Errorf("event %s: the queued bytes are not the posted ones (%d bytes queued, %d posted)", id, len(env.Body), len(body))
		}
	}
}

// postMaybeChunked posts body to the flat source, without a
// Content-Length when chunked (the ingress then reads it in chunks).
func (s *stack) postMaybeChunked(t testing.TB, body []byte, chunked bool) (int, answer, error) {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // hides the length: Transfer-Encoding: chunked
	}
	r, err := http.NewRequest(http.MethodPost, s.srv.URL+"/webhooks/whatsapp", rd)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer test-token")
	resp, err := s.client.Do(r)
	if err != nil {
		return 0, answer{}, err
	}
	defer resp.Body.Close()
	var a answer
	data, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(data, &a)
	return resp.StatusCode, a, nil
}

// holdingPublisher keeps each message's body until the next Publish has
// started (another request has read its body and built its envelope
// meanwhile, taking buffers from the pool), or until the total-th, and
// reports a body that changed under it: the ingress gave its buffer back
// before Publish returned. A hold ends after holdAtMost too, so a request
// that never reaches Publish (refused, or its client failed) fails the
// test by its count instead of hanging it.
type holdingPublisher struct {
	total    int
	mu       sync.Mutex
	cond     *sync.Cond
	arrivals int
	overlaps int // publishes held until a later one started
	active   int // clients still sending (clientDone)
	changed  int
}

const holdAtMost = 10 * time.Second

// clientDone tells the publisher that one client sent its last request.
func (p *holdingPublisher) clientDone() {
	p.mu.Lock()
	p.active--
	p.cond.Broadcast()
	p.mu.Unlock()
}

func newHoldingPublisher(total int) *holdingPublisher {
	p := &holdingPublisher{total: total}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *holdingPublisher) Publish(_ context.Context, m publish.Message) error {
	before := bytes.Clone(m.Body)
	p.mu.Lock()
	p.arrivals++
	me := p.arrivals
	p.cond.Broadcast()
	expired := false
	t := time.AfterFunc(holdAtMost, func() {
		p.mu.Lock()
		expired = true
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	// Only another client can start a later Publish: once this request's
	// client is the last one sending, holding it would wait for ever.
	for p.arrivals == me && p.arrivals < p.total && p.active > 1 && !expired {
		p.cond.Wait()
	}
	t.Stop()
	if p.arrivals > me {
		p.overlaps++
	}
	if !bytes.Equal(before, m.Body) {
		p.changed++
	}
	p.mu.Unlock()
	return nil
}

// TestScratchIsNotReusedWhilePublishing: the envelope handed to Publish
// must stay intact until Publish returns, whatever other requests do
// meanwhile (a buffer returned to the pool before the publish would be
// overwritten by the next event).
func TestScratchIsNotReusedWhilePublishing(t *testing.T) {
	t.Parallel()
	const clients, each = 32, 20
	pub := newHoldingPublisher(clients * each)
	pub.active = clients
	ing, err := New(flatOptions("test-token"), pub, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ing)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(client.CloseIdleConnections)
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pub.clientDone()
			for k := range each {
				body := fmt.Appendf(nil, `{"event":"e","instance":"i","data":{"key":{"id":"%d-%d"}},"pad":%q}`, g, k, strings.Repeat("p", 700+g*13))
				r, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/whatsapp", bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Authorization", "Bearer test-token")
				resp, err := client.Do(r)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("request %d-%d: %d %s", g, k, resp.StatusCode, b)
				}
			}
		}()
	}
	wg.Wait()
	// Every publish but those of the last client still sending was held
	// until a later one started (at most each of those is not).
	if pub.arrivals != clients*each || pub.overlaps < clients*each-each {
		t.Fatalf("%d publishes, %d held while a later one started; want %d and at least %d", pub.arrivals, pub.overlaps, clients*each, clients*each-each)
	}
	if pub.changed > 0 {
		t.Fatalf("%d envelopes changed while Publish held them: a scratch buffer was reused too early", pub.changed)
	}
}

// TestKeepHoldsTheLargerBufferUpToScratchKeep: of the buffer an event
// used and the one the scratch had, the pool keeps the larger, emptied,
// as long as it is at most scratchKeep; a larger one is let go.
func TestKeepHoldsTheLargerBufferUpToScratchKeep(t *testing.T) {
	buf := func(c int) []byte { return make([]byte, 1, c) }
	const (
		usedOne = iota
		oldOne
		none
	)
	for _, c := range []struct {
		used, old int // capacities; -1: nil
		want      int
	}{
		{-1, 100, oldOne},
		{100, 50, usedOne},
		{50, 100, oldOne},
		{100, 100, usedOne}, // a tie keeps the newer
		{scratchKeep, 100, usedOne},
		{scratchKeep + 1, 100, oldOne},
		{-1, scratchKeep, oldOne},
		{-1, scratchKeep + 1, none},
		{scratchKeep + 1, scratchKeep + 1, none},
	} {
		var used, old []byte
		if c.used >= 0 {
			used = buf(c.used)
		}
		if c.old >= 0 {
			old = buf(c.old)
		}
		got := keep(used, old)
		if len(got) != 0 {
			t.Errorf("keep(cap %d, cap %d) has length %d, want it emptied", c.used, c.old, len(got))
		}
		var which int
		switch {
		case got == nil:
			which = none
		case used != nil && &got[:1][0] == &used[0]:
			which = usedOne
		case old != nil && &got[:1][0] == &old[0]:
			which = oldOne
		default:
			t.Fatalf("keep(cap %d, cap %d) returned a buffer that is neither", c.used, c.old)
		}
		if which != c.want {
			t.Errorf("keep(cap %d, cap %d) kept %d, want %d (0 used, 1 old, 2 none)", c.used, c.old, which, c.want)
		}
	}
}
