package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/internal/servicetest"
	"github.com/olp-edu/borda/webhook/envelope"
	"github.com/olp-edu/borda/webhook/forward"
)

// privateDLQ declares a DLQ of the test's own (quorum, as production) and
// returns a connection, a confirm-mode channel on it and the queue name.
func privateDLQ(t *testing.T) (*amqp.Connection, *amqp.Channel, string) {
	t.Helper()
	conn, ch := servicetest.AMQPChannel(t, servicetest.AMQPURL(t))
	q := servicetest.Name(t) + "-dlq"
	if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	servicetest.DeleteAtCleanup(t, conn, []string{q}, nil)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return conn, ch, q
}

func publishLetter(t *testing.T, ch *amqp.Channel, q, id string, body []byte, headers amqp.Table) {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirm("", q, true, false, amqp.Publishing{
		MessageId: id, DeliveryMode: amqp.Persistent, ContentType: envelope.ContentType, Body: body, Headers: headers,
	})
	if err != nil || !dc.Wait() {
		t.Fatalf("publishing %s: %v", id, err)
	}
}

// TestShow_PrintsOneLetterInFullAndKeepsTheQueue: Show returns the chosen
// dead letter with its reasons, the endpoint's reply excerpt, every
// header, the envelope's facts and a body preview with the apikey
// redacted, and the DLQ still holds every message afterwards, shown
// several times over (no delivery spent, as List).
func TestShow_PrintsOneLetterInFullAndKeepsTheQueue(t *testing.T) {
	conn, ch, q := privateDLQ(t)
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	env := envelope.New("ev-2", "whatsapp", "application/json", map[string]string{"user-agent": "evolution"},
		[]byte(`{"event":"messages.upsert","instance":"i1","apikey":"k-123","data":{"key":{"id":"m1"},"webhookToken":"t-9"}}`), at)
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	publishLetter(t, ch, q, "ev-1", []byte("{}"), nil)
	publishLetter(t, ch, q, "ev-2", body, amqp.Table{
		forward.HeaderDLQReason: "4xx", forward.HeaderFirstReason: "4xx", forward.HeaderDLQStatus: int32(422),
		forward.HeaderDLQExcerpt: `{"erro":"instância desconhecida"}`, forward.HeaderAttempt: int32(1),
		forward.HeaderDeadLetteredAt: at.Format(time.RFC3339Nano), forward.HeaderSource: "whatsapp",
	})
	publishLetter(t, ch, q, "ev-3", []byte("{}"), nil)
	ctx := context.Background()
	pub := newRepublisher(t, servicetest.AMQPURL(t))
	for range 3 {
		got, err := Show(ctx, conn, pub, q, "ev-2", 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("Show = %d entries, %v", len(got), err)
		}
		e := got[0]
		if e.ID != "ev-2" || e.Reason != "4xx" || e.Status != 422 || e.Excerpt != `{"erro":"instância desconhecida"}` ||
			!e.DeadLetteredAt.Equal(at) || e.Source != "whatsapp" || e.Attempts != 1 {
			t.Errorf("letter = %+v", e.Letter)
		}
		if e.Headers[forward.HeaderDLQExcerpt] == nil || e.ContentType != envelope.ContentType || e.MessageBytes != len(body) {
			t.Errorf("properties or headers missing: %+v", e)
		}
		if e.SHA256 != env.SHA256 || e.BodyBytes != len(env.Body) || e.ReceivedHeaders["user-agent"] != "evolution" || !e.ReceivedAt.Equal(at) {
			t.Errorf("envelope facts = sha %q, %d bytes, headers %v, received %v", e.SHA256, e.BodyBytes, e.ReceivedHeaders, e.ReceivedAt)
		}
		if strings.Contains(e.Preview, "k-123") || strings.Contains(e.Preview, "t-9") ||
			!strings.Contains(e.Preview, `"apikey":"[redacted]"`) || !strings.Contains(e.Preview, `"instance":"i1"`) {
			t.Errorf("preview = %s", e.Preview)
		}
		waitDepth(t, ch, q, 3)
	}
	if _, err := Show(ctx, conn, pub, q, "ev-9", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Show(unknown id) err = %v, want ErrNotFound", err)
	}
	waitDepth(t, ch, q, 3)
	letters, err := List(ctx, conn, pub, q, 0)
	if err != nil || len(letters) != 3 {
		t.Fatalf("List after Show = %d, %v", len(letters), err)
	}
}

// Preview hides secret-named members at any depth and URL passwords and
// query values, keeps HTML characters readable, does not show a body
// that is not JSON, and cuts at a rune boundary.
func TestPreviewRedactsAndCuts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		max  int
		want string
	}{
		{`{"b":"x","Password":"p","nested":[{"AccessToken":"t"}]}`, PreviewBytes, `{"Password":"[redacted]","b":"x","nested":[{"AccessToken":"[redacted]"}]}`},
		{`{"u":"https://user:pw@host/x?sig=abc"}`, PreviewBytes, `{"u":"https://user:xxxxx@host/x?sig=xxxxx"}`},
		{`{"t":"<b>&</b>"}`, PreviewBytes, `{"t":"<b>&</b>"}`},
		{"not json", PreviewBytes, "(8 bytes, not JSON)"},
		{`"` + strings.Repeat("é", 20) + `"`, 10, `"` + strings.Repeat("é", 4) + "…"},
	} {
		if got := Preview([]byte(c.body), c.max); got != c.want {
			t.Errorf("Preview(%q, %d) = %q, want %q", c.body, c.max, got, c.want)
		}
	}
}

// Fresh attack pass 19 A35: a body holding U+202E (right-to-left
// override) was previewed raw, and reversed on the operator's page what
// followed it. Every rune that is not printable (bidi overrides and
// isolates, zero-width and format characters, line separators, one past
// U+FFFF) is previewed as its JSON escape: the same value, shown inert.
func TestPreviewEscapesTextThatReordersOrHides(t *testing.T) {
	t.Parallel()
	for _, r := range []rune{0x202E, 0x202A, 0x2066, 0x2069, 0x200B, 0x200F, 0x061C, 0x2028, 0xFEFF, 0xE0001} {
		body := fmt.Sprintf(`{"event":"a%cb"}`, r)
		got := Preview([]byte(body), PreviewBytes)
		if strings.ContainsRune(got, r) {
			t.Errorf("U+%04X previewed raw: %q", r, got)
		}
		var v struct{ Event string }
		if err := json.Unmarshal([]byte(got), &v); err != nil || v.Event != fmt.Sprintf("a%cb", r) {
			t.Errorf("U+%04X: the preview %q does not read back as the same value (%q, %v)", r, got, v.Event, err)
		}
	}
	if got := Preview([]byte(`{"a":"olá, ação ✓"}`), PreviewBytes); got != `{"a":"olá, ação ✓"}` {
		t.Errorf("printable text was escaped: %q", got)
	}
}
