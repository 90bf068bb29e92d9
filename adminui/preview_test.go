package adminui

import (
	"strings"
	"testing"
)

func TestPreviewRedactsSecretMembersAtAnyDepth(t *testing.T) {
	body := `{"event":"messages.upsert","apikey":"SEKRET-1","data":{"key":{"id":"ABC"},"message":{"imageMessage":{"jpegThumbnail":"AAAA","url":"https://mmg.example/x?token=SEKRET-2"}},"access_token":"SEKRET-3"},"list":[{"Password":"SEKRET-4"}]}`
	got := Preview([]byte(body), func(s string) string { return strings.ReplaceAll(s, "token=SEKRET-2", "token=xxxxx") })
	for _, leak := range []string{"SEKRET-1", "SEKRET-2", "SEKRET-3", "SEKRET-4", "AAAA"} {
		if strings.Contains(got, leak) {
			t.Errorf("preview leaks %q: %s", leak, got)
		}
	}
	for _, keep := range []string{`"event":"messages.upsert"`, `"id":"ABC"`, `"apikey":"[redacted]"`} {
		if !strings.Contains(got, keep) {
			t.Errorf("preview lacks %q: %s", keep, got)
		}
	}
}

func TestPreviewCutsLongAndControlBodies(t *testing.T) {
	got := Preview([]byte("line1\r\nline2\x1b[31m"+strings.Repeat("é", 1000)), nil)
	if strings.ContainsAny(got, "\r\n\x1b") {
		t.Errorf("control characters kept: %q", got[:40])
	}
	if len(got) > PreviewBytes+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("preview of %d bytes, want ≤ %d ending in …", len(got), PreviewBytes)
	}
}
