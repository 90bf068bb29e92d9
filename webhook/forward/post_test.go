package forward

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		status int
		kind   Kind
		class  string
	}{
		{200, Delivered, "2xx"}, {204, Delivered, "2xx"},
		{301, Permanent, "3xx"},
		{400, Permanent, "4xx"}, {401, Permanent, "4xx"}, {404, Permanent, "4xx"}, {422, Permanent, "4xx"},
		{408, Retryable, "408"}, {429, Retryable, "429"},
		{500, Retryable, "5xx"}, {502, Retryable, "5xx"}, {503, Retryable, "5xx"},
	}
	for _, tt := range tests {
		r := classify(tt.status, "", nil, now)
		if r.Kind != tt.kind || r.Class != tt.class {
			t.Errorf("classify(%d) = %v/%s, want %v/%s", tt.status, r.Kind, r.Class, tt.kind, tt.class)
		}
	}
	if r := classify(429, "120", nil, now); r.RetryAfter != 2*time.Minute {
		t.Errorf("429 Retry-After 120 → %s, want 2m", r.RetryAfter)
	}
	if r := classify(400, "120", nil, now); r.RetryAfter != 0 {
		t.Errorf("a permanent failure keeps no Retry-After, got %s", r.RetryAfter)
	}
}

func TestSafeExcerpt(t *testing.T) {
	t.Parallel()
	if got := safeExcerpt([]byte("erro:\n\t inválido\x00\x1b[31m")); got != "erro: inválido??[31m" {
		t.Errorf("safeExcerpt = %q", got)
	}
	long := []byte(strings.Repeat("é", 300)) // 600 bytes, cut mid-rune at 256
	got := safeExcerpt(long)
	if !utf8.ValidString(got) || len(got) > excerptBytes+3 {
		t.Errorf("safeExcerpt of a long body: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}
