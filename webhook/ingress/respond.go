package ingress

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
)

// respond writes {"status":status} (and "reason" when set) with code and
// returns status for the metrics.
func respond(w http.ResponseWriter, code int, status, reason string) string {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	if code == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="webhook"`) // RFC 9110 §15.5.2
	}
	w.WriteHeader(code)
	if reason == "" && status == StatusPublishedConfirmed {
		_, _ = w.Write(publishedConfirmedBody) // every confirmed event: no allocation
		return status
	}
	body := `{"status":"` + status + `"}` + "\n"
	if reason != "" {
		body = `{"status":"` + status + `","reason":"` + reason + `"}` + "\n"
	}
	_, _ = io.WriteString(w, body)
	return status
}

// Shared header values of every answer (Header.Set allocates a slice per
// call). net/http only reads them (it copies the header map when the
// status is written), and their capacity is 1, so an append elsewhere
// copies instead of writing into them.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// publishedConfirmedBody is the 200 answer's body. Write must not keep
// or change it (io.Writer's contract).
var publishedConfirmedBody = []byte(`{"status":"` + StatusPublishedConfirmed + `"}` + "\n")

// respondThrottled writes the 429 AUTH_THROTTLED answer: Retry-After and
// a body with a PT-BR message for whoever reads the provider's delivery
// log, e.g. {"status":"AUTH_THROTTLED","message":"Muitas falhas de
// autenticação. Tente novamente em 3 segundos.","retry_after":3}.
func respondThrottled(w http.ResponseWriter, retryAfter int) string {
	h := w.Header()
	n := strconv.Itoa(retryAfter)
	h.Set("Retry-After", n)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = io.WriteString(w, `{"status":"`+StatusAuthThrottled+`","message":"Muitas falhas de autenticação. Tente novamente em `+
		n+` segundos.","retry_after":`+n+"}\n")
	return StatusAuthThrottled
}

// retryAfterSeconds rounds d up to whole seconds, at least 1 (RFC 9110
// §10.2.3 Retry-After is in seconds).
func retryAfterSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// invalidMessages are the PT-BR messages of the refusals above, for
// whoever reads a provider's delivery log.
var invalidMessages = map[string]string{
	ReasonInvalidUTF8:         "O corpo JSON não é UTF-8 válido.",
	ReasonDuplicateMember:     "O corpo JSON repete um membro num mesmo objeto (nomes comparados sem distinguir maiúsculas de minúsculas).",
	ReasonNumberOutOfRange:    "O corpo JSON tem um número fora do intervalo que os leitores aceitam (maior que o float64 ou com casas decimais demais).",
	ReasonContentTypeRepeated: "O cabeçalho Content-Type aparece mais de uma vez.",
	ReasonAmbiguousForm:       "O formulário repete um campo, ou o escreve de um modo que leitores diferentes leem de formas diferentes.",
}

// respondInvalid writes 400 {"status":"INVALID_PAYLOAD","reason":reason,
// "message":"<PT-BR>"}: the ingress's contract (status and reason, as
// every answer), plus a message.
func respondInvalid(w http.ResponseWriter, reason string) string {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	w.WriteHeader(http.StatusBadRequest)
	msg, _ := json.Marshal(invalidMessages[reason])
	_, _ = io.WriteString(w, `{"status":"`+StatusInvalidPayload+`","reason":"`+reason+`","message":`+string(msg)+"}\n")
	return StatusInvalidPayload
}
