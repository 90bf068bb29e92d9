package gateway

import (
	"net/http"
	"testing"
)

// TestDropSetCookie2EverySpelling (fresh attack pass A58): Set-Cookie2
// from an upstream passed through while every Set-Cookie spelling of
// olp_auth was policed. It is dropped in every spelling; Set-Cookie and
// look-alike names stay.
func TestDropSetCookie2EverySpelling(t *testing.T) {
	t.Parallel()
	h := http.Header{
		"Set-Cookie2":   {"olp_auth=j"},
		"Set_cookie2":   {"olp_auth=k"},
		"set-cookie2":   {"olp_auth=l"},
		"SET-COOKIE2":   {"olp_auth=m"},
		"Set-Cookie":    {"tp=1"},
		"Set-Cookie22":  {"x"},
		"X-Set-Cookie2": {"x"},
	}
	dropSetCookie2(h)
	for _, k := range []string{"Set-Cookie2", "Set_cookie2", "set-cookie2", "SET-COOKIE2"} {
		if _, ok := h[k]; ok {
			t.Errorf("%s kept", k)
		}
	}
	for _, k := range []string{"Set-Cookie", "Set-Cookie22", "X-Set-Cookie2"} {
		if _, ok := h[k]; !ok {
			t.Errorf("%s dropped", k)
		}
	}
}
