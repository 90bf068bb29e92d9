package adminui

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestPageRefusesADNSRebindingHostName(t *testing.T) {
	p := testPage(t, "tok", &fakeLetters{letters: []DeadLetter{{ID: "ev-1"}}})
	for host, want := range map[string]int{
		"127.0.0.1:9091": 200, "[::1]:9091": 200, "10.1.2.3:9091": 200, "localhost:9091": 200, "LocalHost.:9091": 200,
		"ops.localhost:9091": 200, "127.0.0.1": 200,
		"evil.example:9091": http.StatusMisdirectedRequest, "evil.example": http.StatusMisdirectedRequest,
		"localhost.evil.example:9091": http.StatusMisdirectedRequest, "127.0.0.1.nip.io:9091": http.StatusMisdirectedRequest,
		"": http.StatusMisdirectedRequest,
	} {
		for _, path := range []string{"/ui", "/ui/dead-letters", "/ui/style.css"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Host = host
			rec := httptest.NewRecorder()
			p.Handler().ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("GET %s with Host %q: %d, want %d", path, host, rec.Code, want)
			}
		}
	}
	req := replayForm("ev-1", "ana", "fixed", "tok")
	req.Host = "evil.example:9091"
	req.Header.Set("Origin", "http://evil.example:9091")
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("a rebinding page's replay (Origin = its own Host): %d, want 421", rec.Code)
	}
}
