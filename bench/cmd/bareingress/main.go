// Command bareingress is the bench's floor for a Go webhook ingress: a
// net/http handler that reads the body and publishes it, persistent and
// mandatory, on one amqp091-go confirm channel, and answers 200 once the
// broker acked it (503 otherwise). Nothing else: no authentication, no
// guardrail, no dedup, no envelope, no return correlation, no metrics. It
// shows what net/http and amqp091-go alone cost per event on this machine
// (docs/performance.md, "The ingress's floor"), against which Borda's
// ingress and the Node.js design are read.
//
//	bareingress -listen 127.0.0.1:18300 -amqp amqp://guest:guest@127.0.0.1:5672/ -exchange X -routing-key K
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
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18300", "address to listen on (loopback)")
	url := flag.String("amqp", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	exchange := flag.String("exchange", "", "exchange to publish on (must exist)")
	key := flag.String("routing-key", "", "routing key")
	flag.Parse()
	if err := run(*listen, *url, *exchange, *key); err != nil {
		fmt.Fprintln(os.Stderr, "bareingress:", err)
		os.Exit(1)
	}
}

func run(listen, url, exchange, key string) error {
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
		mu.Lock()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body,
		})
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
