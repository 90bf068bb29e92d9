package ingress

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

// dedupModel is the dedup table's specification in the plainest code: a
// list of entries, oldest first, searched one by one.
type dedupModel struct {
	size    int
	ttl     int64
	entries []modelEntry // oldest first: ordered by the last claim or confirm
	gens    uint64
}

type modelEntry struct {
	key       string
	state     dedupState
	gen       uint64
	expiresAt int64
}

type modelTicket struct {
	key string
	gen uint64
}

func (m *dedupModel) find(key string) int {
	return slices.IndexFunc(m.entries, func(e modelEntry) bool { return e.key == key })
}

func (m *dedupModel) add(key string, gen uint64, st dedupState, now int64) {
	if len(m.entries) == m.size {
		m.entries = slices.Delete(m.entries, 0, 1)
	}
	m.entries = append(m.entries, modelEntry{key: key, state: st, gen: gen, expiresAt: now + m.ttl})
}

func (m *dedupModel) begin(key string, now int64) (dedupState, modelTicket) {
	if i := m.find(key); i >= 0 {
		if now <= m.entries[i].expiresAt {
			return m.entries[i].state, modelTicket{}
		}
		m.entries = slices.Delete(m.entries, i, i+1)
	}
	m.gens++
	m.add(key, m.gens, stateInFlight, now)
	return stateNew, modelTicket{key, m.gens}
}

func (m *dedupModel) confirm(t modelTicket, now int64) {
	if t.gen == 0 {
		return
	}
	if i := m.find(t.key); i >= 0 {
		e := m.entries[i]
		if e.gen != t.gen && now <= e.expiresAt {
			return // another claim's
		}
		m.entries = slices.Delete(m.entries, i, i+1)
	}
	m.add(t.key, t.gen, stateConfirmed, now)
}

func (m *dedupModel) forget(t modelTicket) {
	if i := m.find(t.key); i >= 0 && t.gen != 0 && m.entries[i].gen == t.gen {
		m.entries = slices.Delete(m.entries, i, i+1)
	}
}

// FuzzDedupMatchesModel runs operation sequences on the table and on
// dedupModel and requires the same answers, the same entries (state,
// claim, expiry) and the same age order after every step. The input: a
// size byte, then (operation, argument) byte pairs: begin of one of 12 ids
// (2 sources), confirm or forget of an earlier ticket, or a clock step of
// -2…13 s (the table must not depend on a clock that never goes back).
//
//	go test -run '^$' -fuzz FuzzDedupMatchesModel -fuzztime 60s ./webhook/ingress/
func FuzzDedupMatchesModel(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 1, 0, 0, 0})
	f.Add([]byte{0, 0, 1, 0, 2, 1, 0, 2, 0, 0, 2})
	f.Add([]byte{3, 0, 0, 0, 1, 0, 2, 3, 12, 1, 0, 0, 0, 0, 3, 2, 1})
	f.Add([]byte{2, 0, 5, 3, 15, 0, 5, 1, 0, 3, 1, 0, 5, 2, 0, 0, 6, 0, 7, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		const ttl = 10 * time.Second
		size := 1 + int(data[0]%8)
		d, clock := newTestDedup(size, ttl)
		m := &dedupModel{size: size, ttl: int64(ttl)}
		keys := make(map[dedupKey]string)
		var tickets []dedupTicket
		var mtickets []modelTicket
		for p := 1; p+1 < len(data); p += 2 {
			op, arg := data[p]%4, data[p+1]
			now := d.clock(clock.now()) // the model counts in the table's time
			switch {
			case op == 0:
				source, id := "s"+strconv.Itoa(int(arg%2)), strconv.Itoa(int(arg%12/2))
				keys[d.key(source, id)] = source + "\x00" + id
				st, tk := d.begin(source, id)
				mst, mtk := m.begin(source+"\x00"+id, now)
				if st != mst || (tk.gen == 0) != (mtk.gen == 0) {
					t.Fatalf("step %d: begin(%s, %s) = %v, model %v", p, source, id, st, mst)
				}
				if st == stateNew {
					tickets, mtickets = append(tickets, tk), append(mtickets, mtk)
				}
			case op == 1 && len(tickets) > 0:
				k := int(arg) % len(tickets)
				d.confirm(tickets[k])
				m.confirm(mtickets[k], now)
			case op == 2 && len(tickets) > 0:
				k := int(arg) % len(tickets)
				d.forget(tickets[k])
				m.forget(mtickets[k])
			case op == 3:
				clock.advance(time.Duration(int(arg%16)-2) * time.Second)
			}
			compareDedupWithModel(t, p, d, m, keys)
		}
	})
}

// compareDedupWithModel requires the table's entries, oldest first, to be
// the model's; keys names the digests.
func compareDedupWithModel(t *testing.T, step int, d clockedDedup, m *dedupModel, keys map[dedupKey]string) {
	t.Helper()
	if len(d.index) != len(m.entries) {
		t.Fatalf("step %d: %d entries, model %d", step, len(d.index), len(m.entries))
	}
	k := 0
	for s := d.slots[0].prev; s != 0; s = d.slots[s].prev {
		e := d.slots[s]
		if k >= len(m.entries) {
			t.Fatalf("step %d: more entries in the age list than in the model", step)
		}
		want := m.entries[k]
		got := modelEntry{key: keys[e.key], state: e.state, gen: e.gen, expiresAt: e.expiresAt}
		if got != want {
			t.Fatalf("step %d: entry %d = %+v, model %+v", step, k, got, want)
		}
		if d.index[e.key] != s {
			t.Fatalf("step %d: index[%q] = %d, the list has it in %d", step, want.key, d.index[e.key], s)
		}
		k++
	}
	if k != len(m.entries) {
		t.Fatalf("step %d: %d entries in the age list, model %d", step, k, len(m.entries))
	}
}
