package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

// FuzzRESTReply feeds arbitrary REST replies through the decoding the
// REST store does for the rate-limit and relax scripts: it must return an
// error or a well-formed result, never panic.
func FuzzRESTReply(f *testing.F) {
	f.Add(200, []byte(`{"result":[1,4999,0,0,1,2,0,3]}`))
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
		hits := []Hit{{Algorithm: FixedWindow}, {Algorithm: GCRA}}
		reply := make([]int64, 0, len(arr))
		for _, v := range arr {
			n, err := jsonInt(v)
			if err != nil {
				break
			}
			reply = append(reply, n)
		}
		out := make([]Count, 2)
		if err := decodeHits(hits, reply, out); err == nil && out[0].TTL < -time.Duration(1<<62) {
			t.Fatal("unreachable")
		}
		_, _ = decodeRelax(len(arr)/2, arr)
	})
}
