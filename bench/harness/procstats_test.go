package harness

import (
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"runtime"
	"strings"
	"testing"
)

// HeapLive reads the live heap of a real net/http/pprof endpoint: 32 MiB
// kept reachable show in it, and its figure is what runtime.MemStats
// says right after a collection, not the pacer's target.
func TestHeapLiveSeesMemoryKeptReachable(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	before, err := HeapLive(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	kept := make([][]byte, 32)
	for i := range kept {
		kept[i] = make([]byte, 1<<20)
	}
	after, err := HeapLive(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(kept)
	if grown := after - before; grown < 31<<20 || grown > 40<<20 {
		t.Errorf("live heap grew %d bytes with 32 MiB kept reachable (before %d, after %d)", grown, before, after)
	}
}

func TestHeapAllocRefusesAProfileWithoutIt(t *testing.T) {
	if _, err := heapAlloc(strings.NewReader("heap profile: 0: 0 [0: 0] @ heap/1048576\n# Sys = 1\n"), "200 OK"); err == nil ||
		!strings.Contains(err.Error(), "no HeapAlloc line") {
		t.Errorf("err = %v, want one naming the missing HeapAlloc line", err)
	}
	n, err := heapAlloc(strings.NewReader("# runtime.MemStats\n# Alloc = 5\n# HeapAlloc = 123456\n"), "200 OK")
	if err != nil || n != 123456 {
		t.Errorf("heapAlloc = %d, %v; want 123456", n, err)
	}
}
