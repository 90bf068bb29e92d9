package ingress

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olp-edu/borda/webhook/publish"
)

// nopResponse is the least a ResponseWriter can be, so the benchmark
// counts the ingress's own work only.
type nopResponse struct{ h http.Header }

func (w *nopResponse) Header() http.Header         { return w.h }
func (w *nopResponse) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopResponse) WriteHeader(int)             {}

// SetReadDeadline is supported, as by net/http's own ResponseWriter.
func (w *nopResponse) SetReadDeadline(time.Time) error { return nil }

// confirmAtOnce is a publisher whose broker confirms every message at
// once.
type confirmAtOnce struct{}

func (confirmAtOnce) Publish(context.Context, publish.Message) error { return nil }

// BenchmarkIngressEvent is the ingress's CPU and allocations per event on
// its hot path (docs/performance.md): a ~1 KB Evolution event with a
// Bearer token, authenticated, read, validated, identified, deduped,
// wrapped in its envelope and handed to a publisher that confirms at
// once; one unique event id per iteration. The broker's side is
// BenchmarkWebhookThroughput's.
func BenchmarkIngressEvent(b *testing.B) {
	i, err := New(unitConfig(), confirmAtOnce{}, discardLogger(), prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	text := bytes.Repeat([]byte("x"), 900)
	head := []byte(`{"event":"messages.upsert","instance":"bench","data":{"key":{"id":"evt-`)
	tail := append(append([]byte(`"},"message":{"conversation":"olá`), text...), `"}}}`...)
	body := make([]byte, 0, len(head)+len(tail)+20)
	rd := bytes.NewReader(nil)
	r, err := http.NewRequest(http.MethodPost, "http://gw/webhooks/whatsapp", rd)
	if err != nil {
		b.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer test-token")
	r.Header.Set("User-Agent", "axios/1.7")
	w := &nopResponse{h: http.Header{}}
	b.ReportAllocs()
	b.SetBytes(int64(len(head) + len(tail) + 6))
	for n := 0; b.Loop(); n++ {
		body = append(strconv.AppendInt(append(body[:0], head...), int64(n), 10), tail...)
		rd.Reset(body)
		r.Body = io.NopCloser(rd)
		r.ContentLength = int64(len(body))
		clear(w.h)
		i.ServeHTTP(w, r)
	}
}
