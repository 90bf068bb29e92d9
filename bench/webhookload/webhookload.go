// Package webhookload builds the bench's webhook requests and classifies
// their answers (design.md §6), shared by the soak and fault commands.
package webhookload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/olp-edu/borda/bench/loadgen"
)

// Request returns a loadgen.Request POSTing an Evolution-style event with a
// unique data.key.id (run + sequence number), authenticated with token.
func Request(url, token, run string) loadgen.Request {
	return func(ctx context.Context, i int64) (*http.Request, error) {
		body := fmt.Sprintf(`{"event":"messages.upsert","instance":"bench","data":{"key":{"id":"%s-%d"},"message":{"conversation":"olá"}}}`, run, i)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		return req, nil
	}
}

// Classify names a webhook answer by its JSON status ("PUBLISHED_CONFIRMED",
// "SERVICE_UNAVAILABLE", …), or "HTTP <code>" when the body is not the
// contract's JSON.
func Classify(status int, body []byte) string {
	var v struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(body, &v) == nil && v.Status != "" {
		return v.Status
	}
	return fmt.Sprintf("HTTP %d", status)
}

// Confirmed is the class of a published and confirmed event.
const Confirmed = "PUBLISHED_CONFIRMED"
