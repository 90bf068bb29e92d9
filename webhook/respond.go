package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// respond writes {"status":status} (and "reason" when set) with code and
// returns status for the metrics.
func respond(w http.ResponseWriter, code int, status, reason string) string {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if code == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="webhook"`) // RFC 9110 §15.5.2
	}
	w.WriteHeader(code)
	body := `{"status":"` + status + `"}` + "\n"
	if reason != "" {
		body = `{"status":"` + status + `","reason":"` + reason + `"}` + "\n"
	}
	_, _ = io.WriteString(w, body)
	return status
}

// readBody reads r whole; hint is the Content-Length (-1 unknown), used to
// allocate once.
func readBody(r io.Reader, hint int64) ([]byte, error) {
	size := int64(bytes.MinRead)
	if hint > 0 {
		size = hint + bytes.MinRead
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

func jsonValid(b []byte) bool { return json.Valid(b) }
