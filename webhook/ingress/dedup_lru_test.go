package ingress

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// lruDedup is the dedup table Borda had before the pointer-free one
// (dedup.go): golang-lru's expirable LRU behind a mutex, string keys
// source+"\x00"+id, a *lruDedupEntry per claim as its ticket (forget, which
// the benchmarks do not call, left out). It is kept here only so
// BenchmarkDedupBeginConfirm and BenchmarkDedupFullTableGC can show both,
// old and new, in one run (docs/performance.md). Its expiry goroutine never
// exits and keeps the LRU reachable: a benchmark Purges it when done, or
// the next runs would collect its 20 000 entries too.
type lruDedup struct {
	mu  sync.Mutex
	lru *expirable.LRU[string, *lruDedupEntry]
}

type lruDedupEntry struct{ state dedupState }

func newLRUDedup(size int, ttl time.Duration) *lruDedup {
	return &lruDedup{lru: expirable.NewLRU[string, *lruDedupEntry](size, nil, ttl)}
}

func (d *lruDedup) begin(key string) (dedupState, *lruDedupEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.lru.Get(key); ok {
		return e.state, nil
	}
	e := &lruDedupEntry{state: stateInFlight}
	d.lru.Add(key, e)
	return stateNew, e
}

func (d *lruDedup) confirm(key string, e *lruDedupEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e.state = stateConfirmed
	if cur, ok := d.lru.Peek(key); !ok || cur == e {
		d.lru.Add(key, e)
	}
}
