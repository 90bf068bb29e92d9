package ingress

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestUnconfiguredAnswers503AndRedactsLikeTheIngress(t *testing.T) {
	u := NewUnconfigured([]string{"/webhooks/whatsapp"}, errors.New("no token configured"))
	w := httptest.NewRecorder()
	u.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/webhooks/whatsapp/t/SECRET/messages-upsert", strings.NewReader("{}")))
	if w.Code != 503 || !strings.Contains(w.Body.String(), ReasonNotConfigured) || w.Header().Get("Retry-After") == "" {
		t.Errorf("answer %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	if u.Ready() == nil {
		t.Error("Ready() = nil, want the configuration error")
	}
	for in, want := range map[string]string{
		"/webhooks/whatsapp/t/SECRET/messages-upsert": "/webhooks/whatsapp/t/[redacted]/messages-upsert",
		"/webhooks/whatsapp/t/SECRET":                 "/webhooks/whatsapp/t/[redacted]",
		"/webhooks/whatsappx/t/SECRET":                "/webhooks/whatsappx/t/SECRET", // not the ingress
		"/webhooks/whatsapp/messages-upsert":          "/webhooks/whatsapp/messages-upsert",
	} {
		if got := u.RedactPath(in); got != want {
			t.Errorf("RedactPath(%q) = %q, want %q", in, got, want)
		}
	}
}
