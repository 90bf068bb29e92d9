package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/olp-edu/borda/webhook/deadletter"
)

// TestDLQShowDoesNotSayAnEventFromTheBodyIsMissing: `dlq show` printed
// "event: -" for a messages.upsert letter: the field is the event the URL
// named (empty when the provider posts every event to one URL), not the
// body's. It is labelled so, with the body's own event in the preview.
func TestDLQShowDoesNotSayAnEventFromTheBodyIsMissing(t *testing.T) {
	var b bytes.Buffer
	e := deadletter.Entry{Letter: deadletter.Letter{ID: "ev-1", Source: "whatsapp"}, Preview: `{"event":"messages.upsert"}`}
	writeEntry(&b, e, time.Now())
	out := b.String()
	if strings.Contains(out, "\nevent:") || !strings.Contains(out, "\nurl event:             -\n") || !strings.Contains(out, `"event":"messages.upsert"`) {
		t.Errorf("dlq show of a letter whose URL names no event:\n%s", out)
	}
	b.Reset()
	e.Event = "connection-update"
	writeEntry(&b, e, time.Now())
	if !strings.Contains(b.String(), "\nurl event:             connection-update\n") {
		t.Errorf("dlq show of a letter whose URL names its event:\n%s", b.String())
	}
}
