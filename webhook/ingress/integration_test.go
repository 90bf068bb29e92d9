package ingress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/internal/brokertest"
	"github.com/olp-edu/borda/webhook/publish"
)

// stack is an ingress on a real publisher behind a real HTTP server.
type stack struct {
	cfg     stackConfig
	pub     *publish.Publisher
	pubReg  *prometheus.Registry
	ingress *Ingress
	srv     *httptest.Server
	client  *http.Client
	admin   *brokertest.Admin
}

func newStack(t testing.TB, cfg stackConfig) *stack {
	t.Helper()
	pubReg := prometheus.NewRegistry()
	cfg.Publisher.Registerer = pubReg
	pub := newTestPublisher(t, cfg)
	i, err := New(cfg.Options, pub, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("NewIngress: %v", err)
	}
	srv := httptest.NewServer(i)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	t.Cleanup(client.CloseIdleConnections)
	return &stack{cfg: cfg, pub: pub, pubReg: pubReg, ingress: i, srv: srv, client: client, admin: brokertest.NewAdmin(t)}
}

// reconnects is the publisher's borda_webhook_broker_reconnects_total:
// publishing connections lost after being established.
func (s *stack) reconnects(t testing.TB) float64 {
	t.Helper()
	mfs, err := s.pubReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "borda_webhook_broker_reconnects_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no borda_webhook_broker_reconnects_total")
	return 0
}

// post sends body and returns the code, the answer and how long it took.
func (s *stack) post(t testing.TB, target, contentType string, body []byte, h http.Header) (int, answer, time.Duration) {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, s.srv.URL+target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		r.Header[k] = vs
	}
	r.Header.Set("Content-Type", contentType)
	if r.Header.Get("Authorization") == "" && !strings.Contains(target, "token") && len(s.ingress.sources[0].tokens) > 0 {
		r.Header.Set("Authorization", "Bearer test-token")
	}
	start := time.Now()
	resp, err := s.client.Do(r)
	if err != nil {
		t.Errorf("POST %s: %v", target, err)
		return 0, answer{}, time.Since(start)
	}
	defer resp.Body.Close()
	var a answer
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &a); err != nil {
		t.Errorf("answer %q is not JSON: %v", data, err)
	}
	return resp.StatusCode, a, time.Since(start)
}

// envelopes drains the forward queue and decodes every message, by
// source and event id.
func (s *stack) envelopes(t testing.TB) map[string]envelope.Envelope {
	t.Helper()
	out := map[string]envelope.Envelope{}
	for _, d := range s.admin.Drain(s.cfg.Publisher.Topology.ForwardQueue) {
		env, err := envelope.Decode(d.Body)
		if err != nil {
			t.Fatalf("message %q: %v", d.MessageId, err)
		}
		if d.MessageId != env.ID {
			t.Errorf("message_id %q != envelope id %q", d.MessageId, env.ID)
		}
		if _, dup := out[env.ID]; dup && env.Source == out[env.ID].Source {
			t.Errorf("event %s published twice", env.ID)
		}
		if _, dup := out[env.ID]; dup {
			out[env.Source+"/"+env.ID] = env
			continue
		}
		out[env.ID] = env
	}
	return out
}

func payloadConfig(t testing.TB) stackConfig {
	cfg := testConfig(t)
	cfg.addSources([]Source{
		{Name: "zapster", Path: "/webhooks/zapster", IDFields: []string{"id"}},
		{Name: "github", Path: "/hooks/github", Signature: &Signature{
			Scheme: "github", Tolerance: 5 * time.Minute, Secrets: []string{"test-secret"}}},
		{Name: "standard", Path: "/hooks/standard", Signature: &Signature{
			Scheme: "standard", Tolerance: 5 * time.Minute, Secrets: []string{standardSecret}}},
	}...)
	return cfg
}

// Every provider payload is accepted and lands in the queue byte for byte,
// with the event id of payloads/README.md.
func TestEveryPayloadPublishedByteForByte(t *testing.T) {
	t.Parallel()
	s := newStack(t, payloadConfig(t))
	s.ingress.now = func() time.Time { return time.Unix(1767225600, 0) } // the standard-webhooks timestamp
	files, err := os.ReadDir(payloadDir)
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string][]byte{} // event id → bytes
	wantID := map[string]string{}
	for _, f := range files {
		name := f.Name()
		if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".txt") {
			continue
		}
		body, h := payload(t, name)
		target, ct := "/webhooks/whatsapp/t/test-token", "application/json"
		switch {
		case strings.HasPrefix(name, "zapster"):
			target = "/webhooks/zapster?token=test-token"
		case strings.HasPrefix(name, "github"):
			target = "/hooks/github"
		case strings.HasPrefix(name, "standard"):
			target = "/hooks/standard"
		case strings.HasPrefix(name, "form"):
			ct = "application/x-www-form-urlencoded"
		}
		code, a, _ := s.post(t, target, ct, body, h)
		if code != 200 {
			t.Errorf("%s: %d %+v, want 200", name, code, a)
			continue
		}
		id := s.sourceFor(target).idOf(h, body, bodyIsJSON(mediaKind(ct), body))
		if a.Status == StatusPublishedConfirmed {
			sent[id] = body
		} else if a.Status != StatusAlreadyProcessed || !strings.Contains(name, "messages-upsert") {
			t.Errorf("%s: status %s", name, a.Status)
		}
		wantID[name] = id
	}
	for name, id := range map[string]string{
		// Token sources: the id the body names, "~" and the first 16 hex
		// digits of the body's SHA-256 (sha256sum webhook/testdata/payloads/<file> | cut -c1-16).
		"evolution-v2-messages-upsert.json":           "test-instance-01:messages.upsert:AC0FFEE0TEST00000000000000000001~61e6a3c85f305a91",
		"evolution-v2-messages-upsert.duplicate.json": "test-instance-01:messages.upsert:AC0FFEE0TEST00000000000000000001~61e6a3c85f305a91",
		"evolution-v2-send-message.json":              "test-instance-01:send.message:3EB0TEST00000000000001~f845df5d972ab46a",
		"zapster-message-received.json":               "ntftest0000000000001~64b92980766d50f3",
		// X-GitHub-Delivery is not signed: the body's digest,
		// sha256sum webhook/testdata/payloads/github-ping.json
		"github-ping.json":               "567766f75017825a2cce6f5ed4a4d34c0964b066f8dec26a2eb83a4d53718565",
		"standard-webhooks-example.json": "msg_TEST0000000000000000000001",
	} {
		if wantID[name] != id {
			t.Errorf("%s: event id %q, want %q", name, wantID[name], id)
		}
	}
	for _, name := range []string{"evolution-v2-qrcode-updated.json", "form-urlencoded-messages-upsert.txt", "evolution-v2-connection-update-2-open.json"} {
		body, _ := payload(t, name)
		if wantID[name] != digestHex(body) {
			t.Errorf("%s: event id %q, want the body's SHA-256", name, wantID[name])
		}
	}
	got := s.envelopes(t)
	if len(got) != len(sent) {
		t.Errorf("queue holds %d events, want %d", len(got), len(sent))
	}
	for id, body := range sent {
		env, ok := got[id]
		if !ok {
			t.Errorf("event %s not in the queue", id)
			continue
		}
		if !bytes.Equal(env.Body, body) || env.SHA256 != envelope.Digest(body) {
			t.Errorf("event %s: bytes differ from what was posted", id)
		}
	}
}

func (s *stack) sourceFor(target string) *source {
	src, _ := matchSource(s.ingress.sources, strings.SplitN(target, "?", 2)[0])
	return src
}

// The signature is checked over the raw bytes before anything parses
// them, and the same bytes and content type are published.
func TestSignedBodiesVerifiedAndPublishedRaw(t *testing.T) {
	t.Parallel()
	s := newStack(t, payloadConfig(t))
	for _, tc := range []struct{ ct, body string }{
		{"application/x-www-form-urlencoded", "payload=%7B%22a%22%3A1%7D"},
		{"application/json", `{"a": 1.0, "t": "Gold 🥇"}`},
	} {
		h := http.Header{}
		h.Set("X-Hub-Signature-256", "sha256="+hexHMAC("test-secret", tc.body))
		code, a, _ := s.post(t, "/hooks/github", tc.ct, []byte(tc.body), h)
		if code != 200 || a.Status != StatusPublishedConfirmed {
			t.Fatalf("%s: %d %+v", tc.ct, code, a)
		}
		h.Set("X-Hub-Signature-256", "sha256="+hexHMAC("test-secret", tc.body+" "))
		if code, _, _ := s.post(t, "/hooks/github", tc.ct, []byte(tc.body), h); code != 401 {
			t.Fatalf("%s with a signature of other bytes: %d, want 401", tc.ct, code)
		}
	}
	got := s.envelopes(t)
	if len(got) != 2 {
		t.Fatalf("queue holds %d, want 2", len(got))
	}
	for _, env := range got {
		if !strings.Contains(env.ContentType, "form") && string(env.Body) != `{"a": 1.0, "t": "Gold 🥇"}` {
			t.Errorf("JSON body re-serialised: %q", env.Body)
		}
		if strings.Contains(env.ContentType, "form") && string(env.Body) != "payload=%7B%22a%22%3A1%7D" {
			t.Errorf("form body changed: %q", env.Body)
		}
	}
}

// Many concurrent identical deliveries: exactly one publish; the others
// get 429 REQUEST_IN_FLIGHT or 200 ALREADY_PROCESSED.
func TestDedupRaceExactlyOnePublish(t *testing.T) {
	t.Parallel()
	s := newStack(t, testConfig(t))
	body, _ := payload(t, "evolution-v2-messages-upsert.json")
	const n = 64
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, a, _ := s.post(t, "/webhooks/whatsapp", "application/json", body, nil)
			mu.Lock()
			statuses[a.Status]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if statuses[StatusPublishedConfirmed] != 1 || statuses[StatusRequestInFlight]+statuses[StatusAlreadyProcessed] != n-1 {
		t.Fatalf("statuses = %v, want exactly one PUBLISHED_CONFIRMED", statuses)
	}
	if got := s.admin.Count(s.cfg.Publisher.Topology.ForwardQueue); got != 1 {
		t.Fatalf("queue holds %d, want 1", got)
	}
}

// Redaction is opt-in per source: the named top-level fields are removed,
// every other byte kept, and the envelope records it.
func TestRedactFieldsOptIn(t *testing.T) {
	t.Parallel()
	// The fixture is committed: one without the field would test nothing,
	// so that is a failure, services or not.
	body, _ := payload(t, "evolution-v2-send-message.json")
	if !bytes.Contains(body, []byte(`"apikey"`)) {
		t.Fatal("fixture evolution-v2-send-message.json has no apikey: the redaction would be untested")
	}
	cfg := testConfig(t)
	cfg.addSources([]Source{{Name: "evolution-redacted", Path: "/webhooks/evo", RedactFields: []string{"apikey"}}}...)
	s := newStack(t, cfg)
	if code, a, _ := s.post(t, "/webhooks/evo", "application/json", body, nil); code != 200 {
		t.Fatalf("%d %+v", code, a)
	}
	if code, _, _ := s.post(t, "/webhooks/whatsapp", "application/json", body, nil); code != 200 {
		t.Fatal("flat source refused")
	}
	got := s.envelopes(t)
	var redacted, kept int
	for _, env := range got {
		switch env.Source {
		case "evolution-redacted":
			redacted++
			if bytes.Contains(env.Body, []byte(`"apikey"`)) || fmt.Sprint(env.Redacted) != "[apikey]" ||
				env.OriginalSHA256 != envelope.Digest(body) || env.SHA256 != envelope.Digest(env.Body) {
				t.Errorf("redacted envelope = %+v", env)
			}
		case flatSourceName:
			kept++
			if !bytes.Equal(env.Body, body) || env.Redacted != nil {
				t.Error("the flat source changed the bytes")
			}
		}
	}
	if redacted != 1 || kept != 1 {
		t.Fatalf("envelopes: %d redacted, %d kept", redacted, kept)
	}
}
