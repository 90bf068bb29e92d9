// Command upstream is the bench's demo upstream: it answers every request
// with 200 and a small JSON body (or, for POST, drains the body first).
//
//	upstream -listen 127.0.0.1:18000 [-body-bytes 128]
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (loopback)")
	size := flag.Int("body-bytes", 128, "response body size in bytes")
	flag.Parse()
	body := []byte(`{"upstream":"bench","pad":"` + strings.Repeat("x", max(*size-30, 0)) + `"}` + "\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body)
	})
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}
