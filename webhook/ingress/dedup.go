package ingress

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// dedupState is where an event id stands.
type dedupState int

const (
	stateNew       dedupState = iota // not seen: the caller owns it now
	stateInFlight                    // another request is publishing it
	stateConfirmed                   // the broker confirmed it
)

func (s dedupState) String() string {
	switch s {
	case stateInFlight:
		return "IN_FLIGHT"
	case stateConfirmed:
		return "CONFIRMED"
	}
	return "NEW"
}

// dedupEntry is one remembered event; its pointer identifies the request
// that owns it, so a late failure never removes another request's entry.
type dedupEntry struct{ state dedupState }

// dedup remembers event ids in a bounded LRU with a TTL (docs/webhooks.md §4):
// IN_FLIGHT while one request publishes, CONFIRMED once the broker
// acked; a failed publish forgets the id at once so the provider's retry
// is accepted. It is per process: replicas each keep their own, and the
// forwarder's Redis idempotency key catches what slips through.
type dedup struct {
	mu  sync.Mutex
	lru *expirable.LRU[string, *dedupEntry]
}

func newDedup(size int, ttl time.Duration) *dedup {
	return &dedup{lru: expirable.NewLRU[string, *dedupEntry](size, nil, ttl)}
}

// begin returns stateNew and a ticket when key was unknown (now
// IN_FLIGHT, owned by the caller), else the key's state and nil.
func (d *dedup) begin(key string) (dedupState, *dedupEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.lru.Get(key); ok {
		return e.state, nil
	}
	e := &dedupEntry{state: stateInFlight}
	d.lru.Add(key, e)
	return stateNew, e
}

// confirm marks the ticket's key CONFIRMED (restarting its TTL), adding
// it back if the LRU evicted it meanwhile.
func (d *dedup) confirm(key string, e *dedupEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e.state = stateConfirmed
	if cur, ok := d.lru.Peek(key); !ok || cur == e {
		d.lru.Add(key, e)
	}
}

// forget removes the key if the ticket still owns it.
func (d *dedup) forget(key string, e *dedupEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.lru.Peek(key); ok && cur == e {
		d.lru.Remove(key)
	}
}
