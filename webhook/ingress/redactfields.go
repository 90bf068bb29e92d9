package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
)

// redactFields removes the named top-level members from a JSON object and
// keeps every other byte as it was (no re-serialisation: spacing, key
// order, escapes and numbers stay). It returns the new body and the names
// actually removed; a body that is not a JSON object is returned as is.
func redactFields(body []byte, names []string) ([]byte, []string, error) {
	type span struct{ from, to int }
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return body, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return body, nil, nil
	}
	var cut []span
	var removed []string
	prevEnd := int(dec.InputOffset()) // just after '{' or the previous value
	first := true
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return body, nil, err
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return body, nil, err
		}
		end := int(dec.InputOffset())
		if slices.Contains(names, key) {
			from, to := prevEnd, end
			if first { // no comma before: take the one after instead
				to = skipComma(body, end)
			}
			cut = append(cut, span{from, to})
			if !slices.Contains(removed, key) {
				removed = append(removed, key)
			}
			if first {
				prevEnd = to
				continue // the next member is now the first
			}
		} else {
			first = false
		}
		prevEnd = end
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return body, nil, err
	}
	if len(cut) == 0 {
		return body, nil, nil
	}
	out := make([]byte, 0, len(body))
	at := 0
	for _, c := range cut {
		out = append(out, body[at:c.from]...)
		at = c.to
	}
	out = append(out, body[at:]...)
	return out, removed, nil
}
