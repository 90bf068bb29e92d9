package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		status int
		want   int
	}{
		{"healthy answers 0", http.StatusOK, 0},
		{"unready answers 1", http.StatusServiceUnavailable, 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
			var out, errb bytes.Buffer
			if got := runHealthcheck(context.Background(), []string{"--port", port}, &out, &errb); got != tc.want {
				t.Fatalf("runHealthcheck = %d, want %d (stderr %q)", got, tc.want, errb.String())
			}
		})
	}
}

func TestHealthcheckNothingListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var out, errb bytes.Buffer
	if got := runHealthcheck(context.Background(), []string{"--port", strconv.Itoa(port), "--timeout", "500ms"}, &out, &errb); got != 1 {
		t.Fatalf("runHealthcheck = %d, want 1", got)
	}
}

func TestHealthcheckBadPort(t *testing.T) {
	var out, errb bytes.Buffer
	if got := runHealthcheck(context.Background(), []string{"--port", "0"}, &out, &errb); got != 2 {
		t.Fatalf("runHealthcheck = %d, want 2", got)
	}
}
