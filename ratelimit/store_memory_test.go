package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"
)

func TestMemoryStore_MemoryIsBounded(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(64)
	out := make([]Count, 1)
	for i := range 10_000 {
		_ = storeHit(context.Background(), s, []Hit{{Key: "k" + strconv.Itoa(i), Algorithm: FixedWindow, TTL: time.Hour}}, out)
	}
	if n := s.Len(); n > 64 {
		t.Fatalf("store holds %d keys, bound 64", n)
	}
}
