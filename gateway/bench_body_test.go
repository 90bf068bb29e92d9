package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkChainPostOverRealServer proxies 1 KiB POST bodies through the
// chain served by a real net/http server (so the body deadlines of
// body.go reach a real connection) to a loopback upstream:
//
//	go test -run '^$' -bench ChainPostOverRealServer -benchmem ./gateway/
func BenchmarkChainPostOverRealServer(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	b.Cleanup(up.Close)
	front := httptest.NewServer(benchChain(b, up.URL, newTransport()))
	b.Cleanup(front.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, front.URL+"/api/alunos", bytes.NewReader(body))
			req.Host = "portal.example.org"
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.Close {
				b.Fatal("the gateway closed a keep-alive connection after a fully read body")
			}
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}
