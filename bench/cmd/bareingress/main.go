// Command bareingress is the bench's floor for a Go webhook ingress: a
// net/http handler that reads the body and publishes it, persistent and
// mandatory, on one amqp091-go confirm channel, and answers 200 once the
// broker acked it (503 otherwise). Nothing else: no authentication, no
// guardrail, no dedup, no envelope, no return correlation, no metrics. It
// shows what net/http and amqp091-go alone cost per event on this machine
// (docs/performance.md, "The ingress's floor"), against which Borda's
// ingress and the Node.js design are read.
//
//	bareingress -listen 127.0.0.1:18300 -amqp amqp://guest:guest@127.0.0.1:5672/ -exchange X -routing-key K [-envelope]
//
// -envelope publishes what Borda publishes instead of the raw body: the
// body in Borda's envelope (webhook/envelope, base64 and SHA-256) with
// Borda's message properties (message_id, timestamp, app_id,
// correlation_id), so the broker's cost of the envelope can be read apart
// from the ingress's.
//
// The exchange must exist. GET /readyz answers 200 once connected.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/olp-edu/borda/webhook/envelope"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18300", "address to listen on (loopback)")
	url := flag.String("amqp", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	exchange := flag.String("exchange", "", "exchange to publish on (must exist)")
	key := flag.String("routing-key", "", "routing key")
	env := flag.Bool("envelope", false, "publish Borda's envelope and properties, not the raw body")
	flag.Parse()
	if err := run(*listen, *url, *exchange, *key, *env); err != nil {
		fmt.Fprintln(os.Stderr, "bareingress:", err)
		os.Exit(1)
	}
}

func run(listen, url, exchange, key string, wrap bool) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	var mu sync.Mutex // one publish at a time on the channel
	var seq atomic.Uint64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		msg := amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body}
		if wrap {
			n := seq.Add(1)
			id := strconv.FormatUint(n, 10)
			now := time.Now()
			e := envelope.New(id, "whatsapp", "application/json", map[string]string{"content-type": "application/json"}, body, now)
			if msg.Body, err = e.Encode(); err != nil {
				http.Error(w, "envelope", http.StatusInternalServerError)
				return
			}
			msg.MessageId, msg.Timestamp, msg.AppId, msg.CorrelationId = id, now, "borda", strconv.FormatUint(n, 36)
		}
		mu.Lock()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
		mu.Unlock()
		if err == nil {
			select {
			case <-dc.Done():
				if !dc.Acked() {
					err = fmt.Errorf("nack")
				}
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"status":"SERVICE_UNAVAILABLE"}`)
			return
		}
		_, _ = io.WriteString(w, `{"status":"PUBLISHED_CONFIRMED"}`)
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return srv.Serve(ln)
}
