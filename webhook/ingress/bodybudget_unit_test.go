package ingress

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// budgetAt is a body budget of limit bytes (share: what one client may
// hold, 0 for a quarter) whose clock reads *now.
func budgetAt(limit, share int64, now *time.Time) *bodyBudget {
	return &bodyBudget{limit: limit, share: share, now: func() time.Time { return *now }}
}

// mustReserve charges n bytes to r, failing the test if the budget refuses.
func mustReserve(t *testing.T, r *budgetReader, n int64) {
	t.Helper()
	if err := r.reserve(n); err != nil {
		t.Fatalf("reserve(%d) for %s: %v", n, r.client, err)
	}
}

// TestBudgetAClientMayHoldExactlyItsShare: the share is what one client
// may hold, so a charge that brings it to exactly the share is taken and
// one byte more is refused with errBodyShare.
func TestBudgetAClientMayHoldExactlyItsShare(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, c := range []struct{ limit, share, want int64 }{
		{400, 0, 100},   // a quarter of the budget
		{400, 250, 250}, // the largest body's size, when larger
		{3, 0, 1},       // never below one byte
	} {
		b := budgetAt(c.limit, c.share, &now)
		r := b.reader(strings.NewReader(""), "client")
		if err := r.reserve(c.want); err != nil {
			t.Errorf("limit %d share %d: a charge of exactly the share (%d bytes) = %v, want it taken", c.limit, c.share, c.want, err)
			continue
		}
		if err := r.reserve(1); !errors.Is(err, errBodyShare) {
			t.Errorf("limit %d share %d: one byte past the share = %v, want errBodyShare", c.limit, c.share, err)
		}
		if got := b.used.Load(); got != c.want {
			t.Errorf("limit %d share %d: used = %d after the refused byte, want %d", c.limit, c.share, got, c.want)
		}
	}
}

// TestBudgetReclaimTakesOnlyWhatTheNewBodyNeeds: under pressure the
// budget takes back the slowest old body's bytes, and stops as soon as the
// new charge fits, to the byte: a body that fits exactly is taken, and a
// second old body is left alone. The reclaimed client keeps no entry.
func TestBudgetReclaimTakesOnlyWhatTheNewBodyNeeds(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := budgetAt(400, 400, &now)
	slow := b.reader(strings.NewReader(""), "slow")
	faster := b.reader(strings.NewReader(""), "faster")
	mustReserve(t, slow, 100)
	mustReserve(t, faster, 200)
	now = now.Add(2 * reclaimAfter) // both old: 50 and 100 bytes per second
	fresh := b.reader(strings.NewReader(""), "fresh")
	// 300 held + 200 > 400: reclaiming the slowest (100) leaves 200 + 200 = 400, exactly the limit.
	if err := fresh.reserve(200); err != nil {
		t.Fatalf("a charge that fits exactly once the slowest body is reclaimed = %v, want it taken", err)
	}
	if !slow.reclaimed.Load() {
		t.Error("the slowest old body was not reclaimed")
	}
	if faster.reclaimed.Load() {
		t.Error("a second old body was reclaimed although the new one already fit to the byte")
	}
	if got := b.used.Load(); got != 400 {
		t.Errorf("used = %d, want 400", got)
	}
	if held, ok := b.byClient["slow"]; ok {
		t.Errorf("the reclaimed client still has an entry (%d bytes): one entry per client ever seen", held)
	}
	if got := b.byClient["faster"]; got != 200 {
		t.Errorf("byClient[faster] = %d, want 200", got)
	}
}

// TestBudgetReclaimKeepsTheClientsOtherBodiesCounted: reclaiming one of
// a client's bodies takes back only that body's bytes; the client's other
// bodies still count against its share.
func TestBudgetReclaimKeepsTheClientsOtherBodiesCounted(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := budgetAt(400, 150, &now)
	old := b.reader(strings.NewReader(""), "c")
	mustReserve(t, old, 100)
	now = now.Add(2 * reclaimAfter)
	other := b.reader(strings.NewReader(""), "c")
	mustReserve(t, other, 50)
	// Fill the budget from other clients so the next charge must reclaim.
	for _, client := range []string{"d", "e"} {
		if err := b.reader(strings.NewReader(""), client).reserve(125); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.reader(strings.NewReader(""), "f").reserve(100); err != nil {
		t.Fatalf("a charge that fits once the old body is reclaimed = %v", err)
	}
	if !old.reclaimed.Load() {
		t.Fatal("the old body was not reclaimed")
	}
	if got := b.byClient["c"]; got != 50 {
		t.Errorf("byClient[c] = %d after one of its bodies was reclaimed, want its other body's 50", got)
	}
	if err := other.reserve(101); !errors.Is(err, errBodyShare) {
		t.Errorf("the client's other body going past the share (50 + 101 > 150) = %v, want errBodyShare", err)
	}
}

// TestBudgetAnEmptyBodyIsNeverReclaimed: a body that reserved nothing
// (Content-Length: 0) holds nothing, so the budget never takes it back
// (and never closes its connection) to make room for another body.
func TestBudgetAnEmptyBodyIsNeverReclaimed(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := budgetAt(100, 100, &now)
	empty := b.reader(strings.NewReader(""), "empty")
	aborted := false
	empty.abort = func() { aborted = true }
	mustReserve(t, empty, 0)
	full := b.reader(strings.NewReader(""), "full")
	mustReserve(t, full, 100)
	now = now.Add(2 * reclaimAfter)
	if err := b.reader(strings.NewReader(""), "new").reserve(50); err != nil {
		t.Fatalf("reserve after reclaiming the old full body = %v", err)
	}
	if empty.reclaimed.Load() || aborted {
		t.Error("a body that holds nothing was reclaimed (its connection aborted)")
	}
	if !full.reclaimed.Load() {
		t.Error("the old body that held the budget was not reclaimed")
	}
}

// TestBudgetFillingItExactlyReclaimsNothing: a charge that brings the
// budget to exactly its limit fits, so no old body is taken back for it.
func TestBudgetFillingItExactlyReclaimsNothing(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := budgetAt(300, 300, &now)
	old := b.reader(strings.NewReader(""), "old")
	mustReserve(t, old, 100)
	now = now.Add(2 * reclaimAfter)
	if err := b.reader(strings.NewReader(""), "new").reserve(200); err != nil {
		t.Fatalf("a charge that fills the budget exactly = %v", err)
	}
	if old.reclaimed.Load() {
		t.Error("an old body was reclaimed for a charge that fit without it")
	}
	if got := b.used.Load(); got != 300 {
		t.Errorf("used = %d, want 300", got)
	}
}
