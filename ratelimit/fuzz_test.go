package ratelimit

import (
	"net/http"
	"testing"
)

// FuzzRESTReply feeds arbitrary REST replies through the decoding the
// REST store does for the rate-limit and relax scripts: it must return an
// error or a well-formed result, never panic.
func FuzzRESTReply(f *testing.F) {
	f.Add(200, []byte(`{"result":[1,4999,0,0,1,2,0,3]}`))
	f.Add(200, []byte(`{"result":[1,4999,0,0,1,2,0,3,0,0,1250,5000,1764580000000]}`))
	f.Add(200, []byte(`{"result":["2","59000","",-2]}`))
	f.Add(400, []byte(`{"error":"NOSCRIPT No matching script"}`))
	f.Add(200, []byte(`{"result":null}`))
	f.Add(200, []byte(`{"result":[1.5,"x",[1],{"a":1}]}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		res, err := parseRESTReply(status, body)
		if err != nil {
			return
		}
		if status != http.StatusOK {
			t.Fatalf("status %d accepted", status)
		}
		arr, ok := res.([]any)
		if !ok {
			return
		}
		hits := []Hit{{Algorithm: FixedWindow}, {Algorithm: GCRA}, {Algorithm: SlidingWindow}}
		reply := make([]int64, 0, len(arr))
		for _, v := range arr {
			n, err := jsonInt(v)
			if err != nil {
				break
			}
			reply = append(reply, n)
		}
		out := make([]Count, 3)
		if _, err := decodeHits(hits, reply, out); err == nil && len(reply) != 13 {
			t.Fatalf("%d integers decoded for 3 hits (want 4 each and the store's now)", len(reply))
		}
		_, _ = decodeRelax(len(arr)/2, arr)
	})
}
