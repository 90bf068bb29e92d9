package ratelimit

import (
	"context"
	"net/http"
	"testing"
	"time"
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

// FuzzSlidingWindow drives the embedded store's sliding window (the
// script's arithmetic, TestSlidingWindow_ScriptMatchesTheEmbeddedStore)
// with arbitrary limits, windows and gaps between hits: every answer is
// well-formed (remaining in [0, limit), a refusal waits in (0, 2 windows],
// the reset is at most 2 windows away) and no interval of d ≤ window
// passes more than limit × (1 + d/window).
func FuzzSlidingWindow(f *testing.F) {
	f.Add(int64(50), uint16(5), []byte{0, 0, 0, 200, 255, 1, 7})
	f.Add(int64(1), uint16(1), []byte{255, 255, 0, 0})
	f.Add(int64(3), uint16(60), []byte{10, 20, 30, 40, 50})
	f.Fuzz(func(t *testing.T, limit int64, windowS uint16, gaps []byte) {
		if limit < 1 || limit > 1<<20 || windowS < 1 || windowS > 3600 || len(gaps) > 500 {
			return
		}
		w := time.Duration(windowS) * time.Second
		s := NewMemoryStore(0)
		at := envelopeBase.Add(777 * time.Millisecond)
		h := []Hit{{Key: "k", Algorithm: SlidingWindow, Limit: limit, Period: w}}
		out := make([]Count, 1)
		var passed []time.Duration
		for i, g := range gaps {
			// gaps of 0..255 units of window/64: from bursts to quiet windows
			at = at.Add(time.Duration(g) * w / 64)
			if err := hitAt(context.Background(), s, at, h, out); err != nil {
				t.Fatal(err)
			}
			c := out[0]
			if c.Remaining < 0 || c.Remaining >= limit || c.ResetAfter < 0 || c.ResetAfter > 2*w {
				t.Fatalf("hit %d: %+v", i, c)
			}
			if c.Allowed {
				passed = append(passed, at.Sub(envelopeBase))
			} else if c.RetryAfter <= 0 || c.RetryAfter > 2*w {
				t.Fatalf("hit %d refused with RetryAfter %v", i, c.RetryAfter)
			}
		}
		if n, d, excess := worstInterval(passed, int(limit), w); excess > 1e-9 {
			t.Fatalf("%d passed in %v against %d per %v", n, d, limit, w)
		}
	})
}
