package forward

import (
	"strings"
	"testing"
	"time"
)

func TestIdempotencyKey_HostileIDsBecomeADigest(t *testing.T) {
	for _, id := range []string{"", "a\r\nX-Injected: 1", "a\nb", "nul\x00", "esc\x1b[2J", "tab\tid", " lead", "trail ",
		"rtl\u202e", "bad\xffutf8", strings.Repeat("a", 256)} {
		k := IdempotencyKey(id)
		if !strings.HasPrefix(k, "sha256-") || len(k) != 7+64 || k != IdempotencyKey(id) {
			t.Errorf("IdempotencyKey(%q) = %q, want a stable sha256-<64 hex>", id, k)
		}
	}
	for _, id := range []string{"inst:messages.upsert:3EB0C431", "Loja Centro:connection.update:1", "ação:ü", strings.Repeat("a", 255)} {
		if k := IdempotencyKey(id); k != id {
			t.Errorf("IdempotencyKey(%q) = %q, want the id itself", id, k)
		}
	}
}

// TestForward_QueuedEventWithAHostileIDIsDeliveredWithAValidKey: an event
// queued before the ingress sanitized ids, its id carrying CR/LF (and a
// user-agent with one), made Go's client refuse every POST ("invalid header
// field value"): the event climbed the ladder and was dead-lettered
// without ever reaching the endpoint. It is now delivered once, with the
// id's digest as Idempotency-Key and the bad header dropped.
func TestForward_QueuedEventWithAHostileIDIsDeliveredWithAValidKey(t *testing.T) {
	end := newLegacy(t, always(action{status: 200}))
	h := newHarness(t, end, nil)
	h.start(nil)
	const id = "evil\r\nX-Injected: 1"
	env := jsonEnvelope(id, `{}`)
	env.Headers["user-agent"] = "ua\r\nX-Injected: 2"
	h.publish(env)
	eventually(t, 10*time.Second, "the event delivered", func() bool { return len(end.delivered()) == 1 })
	got := end.all()[0].header
	if k := got.Get(HeaderIdempotencyKey); k != IdempotencyKey(id) || !strings.HasPrefix(k, "sha256-") {
		t.Errorf("Idempotency-Key %q, want %q", k, IdempotencyKey(id))
	}
	if got.Get("X-Injected") != "" || got.Get("User-Agent") != defaultUserAgent {
		t.Errorf("headers %v: want no injected header and the default user-agent", got)
	}
	if d := h.depth(h.top.DLQ); d != 0 {
		t.Errorf("DLQ depth %d, want 0", d)
	}
}
