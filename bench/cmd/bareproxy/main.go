// Command bareproxy is the bench's baseline Go proxy: a bare
// httputil.ReverseProxy (Rewrite + SetURL + SetXForwarded) with a transport
// tuned for one upstream (large idle pool, no HTTP/2 attempt, no
// compression) and a pooled 32 KiB copy buffer. Nothing else: no routing,
// no middleware. It is what Borda's proxy path is compared with.
//
//	bareproxy -listen 127.0.0.1:18001 -upstream http://127.0.0.1:18000 [-pprof 127.0.0.1:18002]
//
// -pprof serves net/http/pprof on its own listener, so the load bench can
// profile the baseline the way it profiles borda (go run ./bench/cmd/load
// -profile DIR).
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	_ "net/http/pprof" // on http.DefaultServeMux, served only with -pprof
	"net/url"
	"os"
	"sync"
	"time"
)

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return *(b.p.Get().(*[]byte)) }
func (b *bufferPool) Put(v []byte) { b.p.Put(&v) }

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (loopback)")
	upstream := flag.String("upstream", "", "upstream base URL")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this address (loopback); empty: off")
	flag.Parse()
	if *pprofAddr != "" {
		go func() {
			srv := &http.Server{Addr: *pprofAddr, ReadHeaderTimeout: 5 * time.Second}
			if err := srv.ListenAndServe(); err != nil {
				fmt.Fprintln(os.Stderr, "bareproxy: pprof:", err)
			}
		}()
	}
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		fmt.Fprintln(os.Stderr, "bareproxy: -upstream must be an absolute URL")
		os.Exit(2)
	}
	pool := &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		BufferPool: pool,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   1024,
			IdleConnTimeout:       90 * time.Second,
			DisableCompression:    true,
			ForceAttemptHTTP2:     false,
			ResponseHeaderTimeout: 30 * time.Second,
		},
	}
	srv := &http.Server{Addr: *listen, Handler: rp, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "bareproxy:", err)
		os.Exit(1)
	}
}
