package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/olp-edu/borda/internal/egress"
)

// runHealthcheck implements `borda healthcheck [--port N] [--path P]
// [--timeout D]`: GET http://127.0.0.1:<port><path> and exit 0 on a 2xx
// answer, 1 otherwise. It exists for container HEALTHCHECKs in images with
// no shell and no curl (distroless, scratch): `HEALTHCHECK CMD
// ["/borda", "healthcheck"]`. It never reads the config file, so a broken
// config does not make the probe itself fail to start; point --port at the
// public listener (default 8080) or the admin listener (9091).
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newBareFlags("healthcheck", stderr)
	port := fs.Int("port", 8080, "TCP port on 127.0.0.1 to probe (public listener 8080, admin 9091)")
	path := fs.String("path", "/healthz", "path to GET (/healthz, /readyz, /readyz/proxy, /readyz/webhook)")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this long")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *port < 1 || *port > 65535 {
		fmt.Fprintf(stderr, "borda healthcheck: --port %d is not a TCP port\n", *port)
		return 2
	}
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)) + *path
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "borda healthcheck: building request: %v\n", err)
		return 2
	}
	client := egress.Client(&http.Transport{DisableKeepAlives: true, Proxy: nil, MaxResponseHeaderBytes: egress.MaxResponseHeaderBytes}, 0)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "borda healthcheck: probing %s: %v\n", url, err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "borda healthcheck: %s answered %s\n", url, resp.Status)
		return 1
	}
	fmt.Fprintf(stdout, "ok %s %d\n", url, resp.StatusCode)
	return 0
}
